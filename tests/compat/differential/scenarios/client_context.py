"""Monarch's actor_mesh._client_context: the controller has a client context once it
used the API; an actor's process does not make one, also when a Port comes back to
it from another actor (what Monarch's port-reconstruction tests check)."""

from _obs import obs, step  # noqa: E402

from monarch._src.actor.actor_mesh import Channel  # noqa: E402
from monarch.actor import Actor, endpoint, this_host  # noqa: E402


class Owner(Actor):
    @endpoint
    async def make_port(self):
        send, self.recv = Channel[int].open()
        return send

    @endpoint
    async def received(self):
        return await self.recv.recv()


class Caller(Actor):
    def __init__(self, owner):
        self.owner = owner

    @endpoint
    async def use(self, value):
        port = await self.owner.make_port.call_one()
        port.send(value)
        # imported here: this class travels by value (from __main__) and Monarch's
        # holder has a lock, which does not pickle
        from monarch._src.actor.actor_mesh import _client_context
        return _client_context._val is not None


pm = this_host().spawn_procs(per_host={"gpus": 2})
owner = pm.slice(gpus=0).spawn("owner", Owner)
caller = pm.slice(gpus=1).spawn("caller", Caller, owner)
step("client_made_in_the_actor_process", lambda: caller.use.call_one(42).get(timeout=60))
step("received", lambda: owner.received.call_one().get(timeout=60))
from monarch._src.actor.actor_mesh import _client_context  # noqa: E402

obs("controller_has_one", _client_context._val is not None)
pm.stop().get(timeout=60)
