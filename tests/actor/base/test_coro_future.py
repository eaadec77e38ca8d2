"""Future._from_coro (monarch_cy._actor.base.coro_future): a lazy Future of a
coroutine, run once by whoever waits for it first."""

from __future__ import annotations

import asyncio
import threading

import pytest

from monarch_cy.actor import Future


def _counting(value=7, exc=None):
    runs = []

    async def body():
        runs.append(threading.get_ident())
        await asyncio.sleep(0)
        if exc is not None:
            raise exc
        return value
    return body(), runs


def test_nothing_runs_before_a_wait_then_get_runs_it_once_here():
    coro, runs = _counting()
    fut = Future._from_coro(coro)
    assert runs == []
    assert fut.get() == 7 and fut.get() == 7 and fut.result() == 7
    assert runs == [threading.get_ident()]        # in the calling thread, once


def test_await_runs_it_in_the_awaiting_task():
    coro, runs = _counting(3)
    fut = Future._from_coro(coro)

    async def main():
        return await fut, threading.get_ident()
    got, tid = asyncio.run(main())
    assert got == 3 and runs == [tid] and fut.get() == 3


def test_the_exception_is_the_futures():
    coro, runs = _counting(exc=KeyError("k"))
    fut = Future._from_coro(coro)
    with pytest.raises(KeyError):
        fut.get()
    assert isinstance(fut.exception(), KeyError) and len(runs) == 1


def test_a_timeout_or_a_callback_runs_it_in_a_thread():
    coro, runs = _counting(9)
    fut = Future._from_coro(coro)
    done = threading.Event()
    fut.add_done_callback(lambda f: done.set())
    assert done.wait(10) and fut.get(timeout=5) == 9
    assert runs and runs[0] != threading.get_ident()
    coro, runs = _counting(1)
    assert Future._from_coro(coro).get(timeout=5) == 1


def test_a_coroutine_is_required():
    with pytest.raises(TypeError, match="takes a coroutine"):
        Future._from_coro(lambda: 1)
