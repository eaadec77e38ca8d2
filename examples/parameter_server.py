"""A parameter server publishes weights as an RDMABuffer; workers pull them one-sidedly.

The server never copies the weights into a message: workers read its memory
directly (same host: a single copy; across hosts: verbs or the TCP fallback).

Run: python examples/parameter_server.py
"""

from __future__ import annotations

import numpy as np

from monarch_cy.actor import Actor, ActorMesh, endpoint, this_host
from monarch_cy.rdma import RDMABuffer


class ParameterServer(Actor):
    def __init__(self, n: int) -> None:
        self.weights = np.zeros(n, dtype=np.float32)
        self.version = 0
        self.buffer = RDMABuffer(memoryview(self.weights).cast("B"))

    @endpoint
    def handle(self) -> tuple[RDMABuffer, int]:
        return self.buffer, self.version

    @endpoint
    def apply(self, delta: np.ndarray) -> int:
        self.weights += delta
        self.version += 1
        return self.version


class Worker(Actor):
    def __init__(self, n: int) -> None:
        self.local = np.empty(n, dtype=np.float32)

    @endpoint
    def pull_and_sum(self, server: ActorMesh) -> float:
        buf, _version = server.handle.call_one().get()
        buf.read_into(memoryview(self.local).cast("B")).get()
        return float(self.local.sum())


def main() -> int:
    n = 1 << 20
    procs = this_host().spawn_procs(per_host={"procs": 3})
    server = procs.slice(procs=0).spawn("ps", ParameterServer, n)
    workers = procs.slice(procs=slice(1, 3)).spawn("workers", Worker, n)
    server.apply.call_one(np.full(n, 0.5, dtype=np.float32)).get()
    sums = workers.pull_and_sum.call(server).get()
    print("each worker pulled weights summing to", sorted(set(sums.values())))
    assert set(sums.values()) == {0.5 * n}
    procs.stop().get()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
