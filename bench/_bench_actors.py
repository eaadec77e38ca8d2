"""Actors for bench_actor.py (the same actor in every system: ping, recv, a 64 MiB
return, a 64 MiB buffer).  numpy is imported lazily so spawning imports nothing."""

from monarch_cy.actor import Actor, endpoint


class Bench(Actor):
    def __init__(self):
        self._big = None

    @endpoint
    def ping(self, x):
        return x

    @endpoint
    def recv(self, arr):
        return int(arr.nbytes)

    @endpoint
    def big(self, nbytes):
        import numpy as np
        if self._big is None or self._big.nbytes != nbytes:
            self._big = np.ones(nbytes, dtype=np.uint8)
        return self._big
