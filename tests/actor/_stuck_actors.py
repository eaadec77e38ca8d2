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
