"""The trainer actor: one data-parallel replica per proc.

A step is a pure function of ``(state after step-1, step)``: the batch depends
only on ``(seed, step, rank)``, gradients are averaged with one all-reduce over
the flat gradient buffer, and the update is applied only after the all-reduce
succeeded.  So a step that fails (a peer died mid-collective) leaves every
survivor exactly at the end of the previous step, and redoing it after
recovery gives the same result as a run without the fault.
"""

from __future__ import annotations

import os
import time

from monarch_cy.actor import Actor, context, endpoint


class Trainer(Actor):
    """Holds the model, flat state and data of one replica.

    ``cfg`` keys: seed, layers, heads, width, block, batch, lr, steps, threads.
    """

    def __init__(self, cfg: dict) -> None:
        import torch

        from monarch_cy._train.data import CharDataset
        from monarch_cy._train.model import CharGPT, FlatState, ModelConfig

        self.cfg = dict(cfg)
        if cfg.get("threads"):
            torch.set_num_threads(int(cfg["threads"]))
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.data = CharDataset(cfg["seed"])
        torch.manual_seed(cfg["seed"])   # every replica starts from the same weights
        mcfg = ModelConfig(self.data.vocab_size, block=cfg["block"], layers=cfg["layers"],
                           heads=cfg["heads"], width=cfg["width"])
        self.model = CharGPT(mcfg).to(self.device)
        self.state = FlatState(self.model, lr=cfg["lr"])
        self.group_name: str | None = None
        self._exported = []

    # -- identity and wiring
    @endpoint
    def identity(self) -> dict:
        return {"rank": context().actor_instance.rank.rank, "pid": os.getpid(), "device": str(self.device),
                "params": self.state.numel}

    @endpoint
    def use_group(self, name: str) -> None:
        """Average gradients over collective group ``name`` from now on."""
        from monarch_cy.collectives import group

        group(name)          # fails here, not mid-step, if it does not exist
        self.group_name = name

    # -- training
    @endpoint
    def step(self, step: int) -> dict:
        """Run training step ``step``; this replica's data-parallel rank is its mesh rank."""
        import math

        import torch

        from monarch_cy._train.model import cosine_lr

        me = context().actor_instance.rank      # its own rank, whoever called it
        rank = me.rank
        world = math.prod(me.extent.sizes)
        if self.state.step != step:
            raise RuntimeError(f"replica is at step {self.state.step}, asked for step {step}")
        t0 = time.perf_counter()
        cfg = self.cfg
        x, y = self.data.batch(step, rank, cfg["batch"], cfg["block"])
        xb = torch.from_numpy(x).to(self.device, non_blocking=True)
        yb = torch.from_numpy(y).to(self.device, non_blocking=True)
        self.state.grads.zero_()
        loss = self.model(xb, yb)
        loss.backward()
        if world > 1:
            from monarch_cy.collectives import group

            group(self.group_name).all_reduce(self.state.grads, "sum")
            self.state.grads.div_(world)
        self.state.lr = cosine_lr(cfg["lr"], step, cfg["steps"])
        self.state.apply()
        value = float(loss.item())
        return {"loss": value, "tokens": int(x.size), "seconds": time.perf_counter() - t0}

    @endpoint
    def checksum(self) -> str:
        return self.state.checksum()

    @endpoint
    def at_step(self) -> int:
        return self.state.step

    # -- state transfer between replicas
    @endpoint
    def export_state(self) -> dict:
        """RDMA buffers over this replica's flat state (no copy), and its step.

        The buffers stay registered until :meth:`release_exports`.
        """
        from monarch_cy.rdma import RDMABuffer

        self.release_exports_now()
        self._exported = [RDMABuffer(t) for t in self.state.buffers().values()]
        return {"step": self.state.step, "buffers": list(self._exported)}

    @endpoint
    def release_exports(self) -> None:
        self.release_exports_now()

    def release_exports_now(self) -> None:
        for b in self._exported:
            try:
                b.drop().get(timeout=10)
            except Exception:  # noqa: BLE001 - best effort: the reader may be gone
                pass
        self._exported = []

    @endpoint
    def import_state(self, exported: dict, timeout: float = 60.0) -> tuple[int, str]:
        """Overwrite this replica with a peer's state, read one-sidedly.

        Returns ``(step, backend)``: the step restored and the RDMA backend used.
        """
        from monarch_cy.rdma import get_rdma_backend

        targets = list(self.state.buffers().values())
        backend = get_rdma_backend(exported["buffers"][0], targets[0])
        futs = [buf.read_into(t, timeout=timeout) for buf, t in zip(exported["buffers"], targets)]
        for f in futs:
            f.get(timeout=timeout + 5)
        self.state.step = exported["step"]
        return self.state.step, backend

    # -- checkpoints
    @endpoint
    def save_checkpoint(self, path: str) -> str:
        """Write state atomically (temp file, then rename); returns the path."""
        import torch

        tmp = f"{path}.tmp.{os.getpid()}"
        torch.save({"step": self.state.step, **{k: v.cpu() for k, v in self.state.buffers().items()}}, tmp)
        os.replace(tmp, path)
        return path

    @endpoint
    def load_checkpoint(self, path: str) -> int:
        import torch

        blob = torch.load(path, map_location="cpu")
        for k, t in self.state.buffers().items():
            t.copy_(blob[k])
        self.state.step = int(blob["step"])
        return self.state.step

    @endpoint
    def sample(self, prompt: str, n: int = 80) -> str:
        """Greedy continuation of ``prompt`` (characters outside the vocabulary dropped)."""
        import torch

        ids = [self.data.chars.index(c) for c in prompt if c in self.data.chars] or [0]
        x = torch.tensor([ids], device=self.device)
        with torch.no_grad():
            for _ in range(n):
                logits = self.model(x[:, -self.cfg["block"]:])
                x = torch.cat([x, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return self.data.decode(x[0].tolist())
