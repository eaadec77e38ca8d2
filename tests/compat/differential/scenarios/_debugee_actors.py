"""Actors of debugger_enter.py, in a module of their own so that both systems pickle
them by reference (code from ``__main__`` goes by value, and Monarch shows it as
``<dynamic-code>``)."""

from monarch.actor import Actor, context, current_rank, endpoint


def _fail():
    raise ValueError("bad rank")


def work(rank):
    if rank == 0:
        breakpoint()  # noqa: T100
        rank += 10
        rank += 10
        return rank
    if rank == 1:
        breakpoint()  # noqa: T100
        rank += 10
        _fail()
    return rank


class Debugee(Actor):
    @endpoint
    async def run(self):
        return work(current_rank().rank)

    @endpoint
    async def name(self):
        return context().actor_instance.actor_id.actor_name
