"""Actors whose endpoints never return on their own, for the stacks tests
(tests/actor/meshes/test_stacks.py): importable by the worker procs."""

from __future__ import annotations

import ctypes
import time

from monarch_cy.actor import Actor, endpoint


class Stuck(Actor):
    @endpoint
    def spin_forever(self) -> None:
        while True:            # pure Python: the GIL is passed on every switch interval
            pass

    @endpoint
    def hold_gil_in_c(self, seconds: float) -> None:
        # PyDLL does not release the GIL: this thread sits in C holding it, and no
        # other thread of the proc (its pump included) runs until it returns.
        ctypes.PyDLL(None).usleep(int(seconds * 1e6))

    @endpoint
    def sleep_in_c(self, seconds: float) -> None:
        time.sleep(seconds)    # C, GIL released


class Asker(Actor):
    @endpoint
    def stacks_of(self, pm) -> list:
        """``pm.dump_stacks()`` from inside an actor (a remote view: its owner reads)."""
        return [(s.rank, s.error, "Asker.stacks_of" in s.functions())
                for s in pm.dump_stacks().get(60).values()]
