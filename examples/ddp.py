"""Data-parallel training written by hand: a gradient all-reduce per step.

The controller makes one collective group over the mesh (NCCL on GPUs, gloo on
CPUs); each replica trains a tiny linear model on its own shard and averages
gradients through ``group("dp")``.  Replicas end identical.

Run: python examples/ddp.py
"""

from __future__ import annotations

from monarch_cy.actor import Actor, current_rank, endpoint, this_host
from monarch_cy.collectives import create_group, group


class Replica(Actor):
    def __init__(self) -> None:
        import torch

        torch.manual_seed(0)
        self.model = torch.nn.Linear(8, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    @endpoint
    def train(self, steps: int) -> list[float]:
        import torch

        g = group("dp")
        gen = torch.Generator().manual_seed(current_rank().rank)
        true_w = torch.arange(8.0)
        losses = []
        for _ in range(steps):
            x = torch.randn(32, 8, generator=gen)
            loss = ((self.model(x).squeeze(1) - x @ true_w) ** 2).mean()
            self.opt.zero_grad()
            loss.backward()
            for p in self.model.parameters():
                g.all_reduce(p.grad)
                p.grad /= g.size
            self.opt.step()
            losses.append(loss.item())
        return losses

    @endpoint
    def weights(self) -> list[float]:
        return [round(float(v), 6) for v in self.model.weight.detach().flatten()]


def main() -> int:
    procs = this_host().spawn_procs(per_host={"procs": 4})
    create_group(procs, "dp")
    replicas = procs.spawn("replica", Replica)
    losses = replicas.train.call(60).get()
    first = [v[0] for v in losses.values()]
    last = [v[-1] for v in losses.values()]
    print(f"loss {sum(first) / 4:.3f} -> {sum(last) / 4:.5f}")
    weights = replicas.weights.call().get()
    assert len({tuple(w) for w in weights.values()}) == 1, "replicas diverged"
    assert sum(last) < 0.01 * sum(first)
    print("replicas identical; learned weights", next(iter(weights.values())))
    procs.stop().get()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
