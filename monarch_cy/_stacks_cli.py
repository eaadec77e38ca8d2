"""``monarch-cy stacks``: every thread's Python stack of every proc of a running job,
from a second terminal, by rank.

Finding the job: the controller's job file (:mod:`monarch_cy._actor.launch.job_file`)
in its run directory: ``--job`` names the run directory, the file or the
controller's pid; without it, the one running job of this user on this host.

Asking: this command becomes a peer of the job with the secret from that file (a
``unix://`` inbox of its own in the job's run directory, proving the secret on
every connection as procs do; the controller reads nothing before the proof), and
sends the controller one ``MESH_CTL "stacks"`` request.  The controller runs py-spy
against each of its procs (:mod:`monarch_cy._actor.meshes.stacks`) and reads its own
threads in-process; nothing is sent to the procs and nothing is stopped.  Blocks for
at most ``--timeout`` seconds plus a few for the answer; a controller that does not
answer (itself stuck holding the GIL) is reported with its pid, for ``py-spy dump``.

Exit codes: 0 stacks printed; 1 the controller did not answer, or py-spy could not
read the procs (ptrace: the message says what to change); 2 bad input (an unknown
``--rank``/``--mesh``: the message names those that exist); 3 no running job found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TextIO

from monarch_cy._cli_common import EXIT_FAILED, EXIT_MACHINE, EXIT_OK, EXIT_USAGE, \
    HelpFormatter

__all__ = ["add_parser", "ask_job", "pick_job"]


class _NoJob(Exception):
    pass


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``stacks`` to the subparsers ``sub``."""
    p = sub.add_parser(
        "stacks", help="print every thread's Python stack of every proc of a running job",
        description="Ask a running controller on this host for the Python stacks of all its "
                    "procs (read with py-spy: procs stuck in C code or holding the GIL answer "
                    "too; nothing is stopped) and print them by proc mesh and rank.",
        epilog="exit codes: 0 printed, 1 the controller did not answer or py-spy could not "
               "attach, 2 unknown --rank/--mesh, 3 no running job. See docs/observability.md.",
        formatter_class=HelpFormatter)
    p.add_argument("--job", default=None, metavar="RUNDIR|FILE|PID",
                   help="the job: its run directory, its job.json, or its controller's pid "
                        "(default: the only running job of this user here)")
    p.add_argument("--mesh", default=None, metavar="NAME",
                   help="only this proc mesh ('controller': the controller's own threads) "
                        "(default: every proc mesh)")
    p.add_argument("--rank", type=int, action="append", default=None, metavar="N",
                   help="only this rank (repeatable; ranks within each proc mesh) "
                        "(default: every rank)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds each proc's read may take")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document: a list of {label, rank, pid, host, error, "
                        "threads: [{name, active, owns_gil, frames: [{name, filename, line}]}]}")
    p.set_defaults(func=_run)
    return p


def pick_job(job: str | None) -> dict:
    """The job file ``job`` names (see ``--job``), or the only running one; raises
    ``_NoJob`` (no job) or ``ValueError`` (a bad ``--job``, several jobs)."""
    from monarch_cy._actor.launch import job_file
    if job is not None and not job.isdigit():
        return job_file.load(job)
    running = job_file.find()
    where = job_file.search_dir()
    if job is not None:
        match = [d for d in running if int(d["pid"]) == int(job)]
        if not match:
            raise _NoJob(f"no running monarch_cy job with controller pid {job} under {where}")
        return match[0]
    if not running:
        raise _NoJob(f"no running monarch_cy job found (looked for mcy-*/job.json under "
                     f"{where}, owned by this user); start one, or pass --job RUNDIR")
    if len(running) > 1:
        listing = "; ".join(f"pid {d['pid']} ({' '.join(map(str, d.get('argv') or []))}) "
                            f"--job {d['rundir']}" for d in running)
        raise ValueError(f"{len(running)} running jobs; choose one with --job: {listing}")
    return running[0]


def ask_job(doc: dict, timeout: float) -> list:
    """Ask the controller of job file ``doc`` for every proc's stacks: a list of
    ``ProcStacks``.  Blocks up to ``timeout + 10`` s; ``TimeoutError`` when the
    controller does not answer; its errors (``StackDumpError``) are raised."""
    from monarch_cy._actor.base.future import Future
    from monarch_cy._actor.model.ports import OneCollector
    from monarch_cy._transport.auth import JobKeys
    from monarch_cy._transport.node import Node
    from monarch_cy._transport.protocol import MESH_CTL, pack
    rundir = doc["rundir"]
    addr = f"unix://{rundir}/k{os.getpid()}"
    node = Node(addr, JobKeys(doc["secret"]), rundir=rundir, is_controller=False,
                direct_addr=addr + "d")
    try:
        node.start_io_thread()
        fut = Future._make(None)
        port = node.register_port(OneCollector(fut, doc["addr"], "stacks", None))
        data, extras = node.encode(([], timeout), (doc["addr"],))
        node.send(doc["addr"], [pack((MESH_CTL, "stacks", -1, node.addr, port, node.key),
                                     data), *extras])
        try:
            return fut.get(timeout + 10.0)
        except TimeoutError:
            raise TimeoutError(
                f"the controller (pid {doc['pid']}) did not answer within "
                f"{timeout + 10.0:g} s; it may itself be stuck holding the GIL: read it "
                f"with `py-spy dump --pid {doc['pid']}`") from None
    finally:
        node.close()


def _select(stacks: list, mesh: str | None, ranks) -> list:
    have = {}
    for s in stacks:
        have.setdefault(s.label, []).append(s.rank)
    if mesh is not None and mesh not in have:
        raise ValueError(f"--mesh {mesh!r}: no such proc mesh in this job; it has "
                         + ", ".join(repr(m) for m in have))
    chosen = [s for s in stacks if mesh is None or s.label == mesh]
    if ranks:
        scope = {m: r for m, r in have.items() if mesh is None or m == mesh}
        missing = [r for r in ranks if not any(r in rs for rs in scope.values())]
        if missing:
            exist = "; ".join(f"{m!r}: {_ranges(rs)}" for m, rs in scope.items())
            raise ValueError(f"--rank {', '.join(map(str, missing))}: no such rank; the "
                             f"ranks that exist are {exist}")
        chosen = [s for s in chosen if s.rank in ranks]
    return chosen


def _ranges(ranks) -> str:
    rs = sorted(set(ranks))
    out, start = [], None
    for i, r in enumerate(rs):
        if start is None:
            start = r
        if i + 1 == len(rs) or rs[i + 1] != r + 1:
            out.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    return ", ".join(out)


def _run(args: argparse.Namespace, out: TextIO) -> int:
    from monarch_cy._checks import check_timeout
    from monarch_cy._errors import StackDumpError
    from monarch_cy._stacks import format_stacks
    me = "monarch-cy stacks"
    try:
        check_timeout("--timeout", args.timeout)
    except (TypeError, ValueError) as e:
        print(f"{me}: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        doc = pick_job(args.job)
    except _NoJob as e:
        print(f"{me}: {e}", file=sys.stderr)
        return EXIT_MACHINE
    except ValueError as e:
        print(f"{me}: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        stacks = ask_job(doc, args.timeout)
    except (TimeoutError, StackDumpError, OSError) as e:
        print(f"{me}: {e}", file=sys.stderr)
        return EXIT_FAILED
    try:
        stacks = _select(stacks, args.mesh, args.rank)
    except ValueError as e:
        print(f"{me}: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps([s.to_dict() for s in stacks], indent=1), file=out)
    else:
        print(f"job: controller pid {doc['pid']} on {doc.get('host')}, run directory "
              f"{doc['rundir']}\n", file=out)
        print(format_stacks(stacks), file=out)
    return EXIT_OK
