"""``spawn_procs(proc_bind=[...])``: CPU and NUMA binding per proc, as in Monarch.

``proc_bind`` has one dict per proc of a host (its length must equal
``prod(per_host.values())``; entry ``i`` applies to the ``i``-th proc of every
host).  Keys, with Monarch's meanings:

* ``physcpubind``: CPU list (``numactl --physcpubind``);
* ``cpunodebind``: NUMA node list whose CPUs the proc runs on (``--cpunodebind``);
* ``membind``: NUMA node list memory is allocated from (``--membind``,
  ``set_mempolicy(MPOL_BIND)``);
* ``cpus``: CPU list (``taskset -c``), used only when no NUMA key applies.

Lists are ``numactl``'s syntax: ``"0-3,8,10-11"``.  CPU numbers must be below
:data:`MAX_CPUS` (8192, the most CPUs a Linux kernel can be built for) and NUMA node
numbers below :data:`MAX_NODES` (1024, likewise); a list naming a larger one is
refused with a ``ValueError`` naming the entry and the list, before anything is
expanded (the bound is the kernel's, not this machine's: the procs may start on
other hosts).  On a host without NUMA
(no ``/sys/devices/system/node/node0``) the NUMA keys are ignored, as Monarch's
launcher ignores them, and ``cpus`` applies.  Unlike Monarch, nothing is wrapped in
``numactl``/``taskset``: the proc binds itself (``sched_setaffinity`` and the
``set_mempolicy`` system call) before any user code runs, so forked procs bind too
and neither tool need be installed.  A binding the kernel refuses (a CPU or node
that does not exist there) makes that proc exit at start with the reason logged,
and the failure is reported through supervision.
"""

from __future__ import annotations

import os

__all__ = ["KEYS", "MAX_CPUS", "MAX_NODES", "check", "parse_list", "apply"]

KEYS = ("cpunodebind", "membind", "physcpubind", "cpus")
# Linux's own ceilings: NR_CPUS is at most 8192 (x86-64 MAXSMP, powerpc), and
# MAX_NUMNODES at most 1 << 10.  A number past them cannot name anything on any host.
MAX_CPUS = 8192
MAX_NODES = 1024
_LIMIT = {"cpus": MAX_CPUS, "physcpubind": MAX_CPUS,
          "cpunodebind": MAX_NODES, "membind": MAX_NODES}
_NODE_DIR = "/sys/devices/system/node"
_MPOL_BIND = 2
_SYS_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237, "ppc64le": 261}


def parse_list(text: str, what: str, limit: int = MAX_CPUS) -> list[int]:
    """``"0-3,8"`` -> ``[0, 1, 2, 3, 8]``; ``ValueError`` naming ``what`` and ``text``
    if malformed or if a number is ``limit`` or more (checked before any range is
    expanded, so the result has at most ``limit`` entries)."""
    ranges = []
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what} must be a non-empty list like '0-3,8', not {text!r}")
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not (lo.isascii() and lo.isdigit()) or (
                sep and not (hi.isascii() and hi.isdigit())):
            raise ValueError(f"{what} must be a list like '0-3,8', not {text!r}")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"{what} has a decreasing range {part!r} in {text!r}")
        if b >= limit:
            raise ValueError(f"{what} names {b} in {text!r}: numbers must be below "
                             f"{limit} (the most {'NUMA nodes' if limit == MAX_NODES else 'CPUs'} "
                             f"Linux supports)")
        ranges.append((a, b))
    out, end = [], -1                    # overlapping ranges are expanded once
    for a, b in sorted(ranges):
        out.extend(range(max(a, end + 1), b + 1))
        end = max(end, b)
    return out


def check(proc_bind, per_host_count: int) -> list:
    """One checked dict (or None) per proc of a host; ``ValueError``/``TypeError``
    naming the entry and the key otherwise."""
    if proc_bind is None:
        return [None] * per_host_count
    if isinstance(proc_bind, (str, bytes, dict)) or not hasattr(proc_bind, "__len__"):
        raise TypeError(f"proc_bind must be a list of dicts, not {proc_bind!r}")
    if len(proc_bind) != per_host_count:
        raise ValueError(f"proc_bind length ({len(proc_bind)}) must equal procs_per_host "
                         f"({per_host_count}), the product of per_host's sizes")
    out = []
    for i, entry in enumerate(proc_bind):
        if not isinstance(entry, dict):
            raise TypeError(f"proc_bind[{i}] must be a dict, not {entry!r}")
        bad = set(entry) - set(KEYS)
        if bad:
            raise ValueError(f"proc_bind[{i}] has unknown keys {sorted(bad)}; "
                             f"known: {list(KEYS)}")
        for k, v in entry.items():
            parse_list(v, f"proc_bind[{i}][{k!r}]", _LIMIT[k])
        out.append(dict(entry) or None)
    return out


def _node_cpus(nodes: list[int]) -> list[int]:
    cpus = []
    for n in nodes:
        path = f"{_NODE_DIR}/node{n}/cpulist"
        try:
            with open(path) as f:
                cpus += parse_list(f.read().strip(), path)
        except FileNotFoundError:
            raise ValueError(f"cpunodebind names NUMA node {n}, which this host "
                             "does not have") from None
    return cpus


def _set_mempolicy(nodes: list[int]) -> None:
    import ctypes
    import platform
    nr = _SYS_SET_MEMPOLICY.get(platform.machine())
    if nr is None:
        raise OSError(f"membind is not supported on {platform.machine()}")
    maxnode = max(nodes) + 2
    words = (maxnode + 63) // 64
    mask = (ctypes.c_ulong * words)()
    for n in nodes:
        mask[n // 64] |= 1 << (n % 64)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(nr, _MPOL_BIND, mask, ctypes.c_ulong(maxnode)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"set_mempolicy(MPOL_BIND, nodes {nodes}): {os.strerror(e)}")


def apply(bind: dict) -> None:
    """Bind this process as ``bind`` says (see the module docstring)."""
    numa = os.path.exists(f"{_NODE_DIR}/node0")
    cpus = None
    if numa and ("physcpubind" in bind or "cpunodebind" in bind):
        if "physcpubind" in bind:
            cpus = set(parse_list(bind["physcpubind"], "physcpubind"))
        if "cpunodebind" in bind:
            node_cpus = set(_node_cpus(parse_list(bind["cpunodebind"], "cpunodebind",
                                                  MAX_NODES)))
            cpus = node_cpus if cpus is None else cpus & node_cpus
    elif "cpus" in bind:
        cpus = set(parse_list(bind["cpus"], "cpus"))
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    if numa and "membind" in bind:
        _set_mempolicy(parse_list(bind["membind"], "membind", MAX_NODES))
