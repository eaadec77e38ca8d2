"""Shared by test folders that start procs: what this process started, and a leak check."""

from __future__ import annotations

import contextlib
import os


def children() -> list:
    """Pids of every descendant of this process (procs are forked by a zygote
    child), zombies included."""
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(fields[1])
    out, frontier = [], {os.getpid()}
    while frontier:
        kids = {p for p, pp in parent.items() if pp in frontier}
        out.extend(kids)
        frontier = kids
    return out


@contextlib.contextmanager
def no_leaks():
    """Around a session: stop every mesh still running, then assert that no child
    process and no ``/dev/shm`` entry is left that was not there before (but this
    process's own run directory, which may live there and goes at exit)."""
    shm_before = set(os.listdir("/dev/shm"))
    kids_before = set(children())
    yield
    from monarch_cy._transport import node as _node
    if _node.current_node() is not None:
        from monarch_cy._actor.meshes.proc_stop import stop_all
        stop_all(grace=3.0)
    from monarch_cy._actor.launch.rundir import reaper_pids
    # The run directory's reaper lives as long as this process (by design).
    leftover = set(children()) - kids_before - set(reaper_pids())
    assert not leftover, f"child processes left behind: {leftover}"
    new_shm = set(os.listdir("/dev/shm")) - shm_before
    live = _node.current_node()           # its run directory goes at exit (by design)
    if live is not None and getattr(live, "rundir", None):
        new_shm.discard(os.path.basename(live.rundir))
    assert not new_shm, f"/dev/shm segments left behind: {new_shm}"
