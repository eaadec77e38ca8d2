"""Actors for the mesh-group tests (importable by worker procs)."""

from __future__ import annotations

from monarch_cy.actor import Actor, current_rank, endpoint


class Reducer(Actor):
    @endpoint
    def all_reduce(self, name: str, value: float):
        import torch

        from monarch_cy.collectives import group

        t = torch.tensor([value], dtype=torch.float64)
        g = group(name)
        g.all_reduce(t)
        return (g.rank, g.size, float(t.item()), dict(current_rank()))

    @endpoint
    def all_reduce_point(self, name: str):
        """Contribute 10*rows + cols, so each line's sum says who was in it."""
        import torch

        from monarch_cy.collectives import group

        p = dict(current_rank())
        t = torch.tensor([10.0 * p["rows"] + p["cols"]], dtype=torch.float64)
        group(name).all_reduce(t)
        return float(t.item())

    @endpoint
    def all_reduce_gpu(self, name: str, value: float):
        import torch

        from monarch_cy.collectives import group

        g = group(name)
        t = torch.tensor([value], dtype=torch.float64, device="cuda")
        g.all_reduce(t)
        return (g.rank, g.size, float(t.item()), dict(current_rank()))

    @endpoint
    def backend_of(self, name: str) -> str:
        from monarch_cy.collectives import group

        return type(group(name)).__name__

    @endpoint
    def torch_dist_sum(self, value: float):
        import os

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")
        t = torch.tensor([value])
        dist.all_reduce(t)
        out = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), float(t.item()))
        dist.destroy_process_group()
        return out
