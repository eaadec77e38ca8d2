"""``RestartPolicy``: respawn failed ranks of a proc mesh automatically
(``spawn_procs(restart=...)``; the respawn itself: :mod:`.respawn`)."""

from __future__ import annotations

from monarch_cy._checks import is_int, is_number

__all__ = ["RestartPolicy"]


class RestartPolicy:
    """Respawn failed ranks of a proc mesh automatically.

    ``max_restarts`` respawns in all for the mesh (then failures go to the fault
    hook as usual); before the n-th one, wait ``min(backoff_s * factor**(n-1),
    max_backoff_s)``.  A failure the policy respawns counts as handled.
    """

    __slots__ = ("max_restarts", "backoff_s", "factor", "max_backoff_s")

    def __init__(self, max_restarts: int = 3, backoff_s: float = 0.1, factor: float = 2.0,
                 max_backoff_s: float = 5.0) -> None:
        if not is_int(max_restarts) or max_restarts < 0:
            raise ValueError(f"max_restarts must be an int >= 0, not {max_restarts!r}")
        for n, v in (("backoff_s", backoff_s), ("max_backoff_s", max_backoff_s)):
            if not is_number(v) or v < 0:
                raise ValueError(f"{n} must be a number >= 0, not {v!r}")
        if not is_number(factor) or factor < 1:
            raise ValueError(f"factor must be a number >= 1, not {factor!r}")
        self.max_restarts, self.backoff_s = max_restarts, float(backoff_s)
        self.factor, self.max_backoff_s = float(factor), float(max_backoff_s)

    def delay(self, n: int) -> float:
        """Seconds to wait before the n-th restart (n >= 1)."""
        return min(self.backoff_s * self.factor ** max(0, n - 1), self.max_backoff_s)

    def __repr__(self):
        return (f"RestartPolicy(max_restarts={self.max_restarts}, "
                f"backoff_s={self.backoff_s}, factor={self.factor}, "
                f"max_backoff_s={self.max_backoff_s})")
