"""The cached state of a :class:`~.slurm.SlurmJob`: what a later controller needs to
re-attach to a running allocation (``state(cached_path=...)``, Monarch's
``JobTrait`` cache).

The file is JSON, not Monarch's pickle: it holds the job's specification (the
constructor arguments that shape the allocation), the SLURM job id, the agents'
addresses (``tcp://<NodeAddr>:<monarch_port>``, in ``SLURM_NODEID`` order) and the
job secret (or, with ``secret_file=``, only that file's path).  Because of the
secret it is written mode 0600, atomically (a temporary file renamed over it); a
symlink at the path is followed, as Monarch's ``dump`` does.  A file that is not a
monarch_cy SLURM job state is never overwritten: reading it raises ``ValueError``
naming the path.
"""

from __future__ import annotations

import json
import os

__all__ = ["read", "write", "remove", "FORMAT"]

FORMAT = "monarch_cy.SlurmJob/1"


def _target(path: str) -> str:
    return os.path.realpath(path) if os.path.islink(path) else path


def read(path: str) -> dict | None:
    """The cached state at ``path``; None when there is no file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        d = json.loads(raw)
        ok = isinstance(d, dict) and d.get("format") == FORMAT
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"cached_path {path!r} exists but does not hold a monarch_cy "
                         f"SlurmJob state ({FORMAT}); give another path or remove it")
    return d


def write(path: str, state: dict) -> None:
    """Write ``state`` (plus the format tag) to ``path``, mode 0600, atomically."""
    target = _target(path)
    d = os.path.dirname(os.path.abspath(target))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{os.path.basename(target)}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(dict(state, format=FORMAT), f, indent=1, sort_keys=True)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def remove(path: str, job_id: str | None = None) -> None:
    """Remove the cached state at ``path`` (only if it names ``job_id``, when given)."""
    try:
        if job_id is not None and (read(path) or {}).get("job_id") != job_id:
            return
        os.remove(_target(path))
    except (OSError, ValueError):
        pass
