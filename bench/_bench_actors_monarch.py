"""The bench actor for torchmonarch (``monarch.actor``): same endpoints as ours."""

from monarch.actor import Actor, endpoint


class MBench(Actor):
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
