"""Training data made on the spot, deterministically: nothing is downloaded.

A small stochastic grammar writes English-like sentences about a fixed cast; the
same seed always gives the same text, so runs are reproducible and a character
model has real structure to learn (agreement, fixed phrases, punctuation).

Batches are a pure function of ``(seed, step, rank)``: a replica restored after a
failure draws exactly the batch it would have drawn, whatever happened before.
"""

from __future__ import annotations

import random

import numpy as np

_SUBJECTS = ["the miller", "a young fox", "the old queen", "my neighbour", "the ferryman",
             "a grey heron", "the baker's son", "our captain", "the blind poet", "a tired horse"]
_VERBS = ["watched", "followed", "praised", "feared", "carried", "remembered", "called", "mended",
          "sold", "forgot"]
_OBJECTS = ["the river", "a silver bell", "the long road", "an empty boat", "the winter fields",
            "a broken wheel", "the lantern", "her brother", "the king's letter", "a basket of pears"]
_PLACES = ["at dawn", "by the mill", "in the rain", "before supper", "under the bridge",
           "near the harbour", "all night", "on market day"]
_JOINS = ["and then", "but later", "so at last", "while"]


def _sentence(rng: random.Random) -> str:
    s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    if rng.random() < 0.6:
        s += f" {rng.choice(_PLACES)}"
    if rng.random() < 0.3:
        s += f", {rng.choice(_JOINS)} {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    return s[0].upper() + s[1:] + rng.choice([".", ".", ".", "!", "?"])


def make_corpus(seed: int = 0, nchars: int = 400_000) -> str:
    """About ``nchars`` characters of text, the same for the same ``seed``."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < nchars:
        para = " ".join(_sentence(rng) for _ in range(rng.randint(3, 7))) + "\n"
        parts.append(para)
        total += len(para)
    return "".join(parts)


class CharDataset:
    """The corpus as token ids, with the batch rule above."""

    def __init__(self, seed: int = 0, nchars: int = 400_000) -> None:
        text = make_corpus(seed, nchars)
        self.chars = sorted(set(text))
        self.vocab_size = len(self.chars)
        table = np.zeros(256, dtype=np.int64)
        for i, c in enumerate(self.chars):
            table[ord(c)] = i
        self.tokens = table[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
        self.seed = seed

    def batch(self, step: int, rank: int, batch_size: int, block: int):
        """``(x, y)`` int64 arrays of shape (batch_size, block); y is x shifted by one."""
        if step < 0 or rank < 0:
            raise ValueError(f"step and rank must be >= 0, got step={step}, rank={rank}")
        rng = np.random.default_rng([self.seed, step, rank])
        starts = rng.integers(0, len(self.tokens) - block - 1, size=batch_size)
        idx = starts[:, None] + np.arange(block + 1)[None, :]
        seq = self.tokens[idx]
        return seq[:, :-1], seq[:, 1:]

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)
