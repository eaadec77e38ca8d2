"""A small GPT-style character model, and its parameters held in flat buffers.

:class:`FlatState` lays every parameter, its gradient and the AdamW moments out
as views into four contiguous tensors.  Data parallelism then needs one
all-reduce per step over the flat gradient, a replica's whole state is three
buffers plus a step counter (what a peer copies to restore a replacement), and
a checksum of the replica is a checksum of those buffers.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from monarch_cy._checks import is_int


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    block: int = 64
    layers: int = 2
    heads: int = 4
    width: int = 128

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block", "layers", "heads", "width"):
            v = getattr(self, name)
            if not is_int(v) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.width % self.heads:
            raise ValueError(f"width ({self.width}) must be a multiple of heads ({self.heads})")


class _Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width)
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width))
        self.heads = cfg.heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class CharGPT(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.width)
        self.pos = nn.Embedding(cfg.block, cfg.width)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


class FlatState:
    """Parameters, gradients and AdamW moments of ``model`` in four flat tensors.

    After construction ``model``'s parameters *are* views of :attr:`params`
    (and their ``.grad`` views of :attr:`grads`), so updating the flat buffers
    updates the model in place.
    """

    def __init__(self, model: nn.Module, lr: float, betas=(0.9, 0.95), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        ps = [p for p in model.parameters() if p.requires_grad]
        n = sum(p.numel() for p in ps)
        dev, dtype = ps[0].device, ps[0].dtype
        self.params = torch.empty(n, device=dev, dtype=dtype)
        self.grads = torch.zeros(n, device=dev, dtype=dtype)
        self.exp_avg = torch.zeros(n, device=dev, dtype=dtype)
        self.exp_avg_sq = torch.zeros(n, device=dev, dtype=dtype)
        self.step = 0
        off = 0
        for p in ps:
            k = p.numel()
            self.params[off:off + k].copy_(p.detach().reshape(-1))
            p.data = self.params[off:off + k].view_as(p)
            p.grad = self.grads[off:off + k].view_as(p)
            off += k
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay

    @property
    def numel(self) -> int:
        return self.params.numel()

    def buffers(self) -> dict[str, torch.Tensor]:
        """What a replica is, apart from :attr:`step`: copy these to clone it."""
        return {"params": self.params, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}

    @torch.no_grad()
    def apply(self) -> None:
        """One AdamW update from :attr:`grads` (already averaged over replicas)."""
        self.step += 1
        b1, b2 = self.betas
        self.params.mul_(1 - self.lr * self.weight_decay)
        self.exp_avg.lerp_(self.grads, 1 - b1)
        self.exp_avg_sq.mul_(b2).addcmul_(self.grads, self.grads, value=1 - b2)
        bias1 = 1 - b1 ** self.step
        bias2 = 1 - b2 ** self.step
        denom = (self.exp_avg_sq / bias2).sqrt_().add_(self.eps)
        self.params.addcdiv_(self.exp_avg, denom, value=-self.lr / bias1)

    def checksum(self) -> str:
        """SHA-256 over the bytes of every buffer and the step: equal iff replicas agree."""
        h = hashlib.sha256(str(self.step).encode())
        for t in self.buffers().values():
            h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        return h.hexdigest()


def cosine_lr(base: float, step: int, total: int, warmup: int = 10) -> float:
    """Linear warm-up then cosine decay to 10% of ``base``."""
    if step < warmup:
        return base * (step + 1) / warmup
    frac = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
