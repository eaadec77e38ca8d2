"""``exec_command(host_mesh, cmd)``: run a command on every host of a mesh (Monarch's
``monarch.job.exec_command``), and the :class:`BashActor` that runs it there.

``exec_command(host_mesh, cmd, env=None, workdir=None, output_dir=None, rank=None,
point=None, per_host=None)`` returns at once a ``Future[int]``: the largest return
code over every proc it ran on (0: all succeeded).  Nothing happens until the Future
is waited on or awaited (it is lazy, as Monarch's).  Then:

1. the mesh is narrowed: ``point={"hosts": 2}`` slices it (``host_mesh.slice(**point)``);
   ``rank=3`` picks one rank of it flattened (``flatten("rank").slice(rank=3)``);
2. procs are started on it (``spawn_procs(per_host=per_host)``: one per host unless
   ``per_host`` asks for more) and a ``BashActor`` in each;
3. ``cmd`` runs in each: a ``.py`` file (``["train.py", "--lr", "1"]``) or a module
   (``["-m", "pkg.mod", ...]``) with this Python, anything else as a bash script of
   ``export`` lines for ``env``, a ``cd`` (to ``workdir``, else to the client's working
   directory when it exists there) and the quoted command;
4. with ``output_dir`` unset, each proc's stdout and stderr are printed here (stdout
   to ``sys.stdout``, stderr to ``sys.stderr``), in rank order; with it set, each
   proc writes ``stdout.txt`` and ``stderr.txt`` there instead (``$SUBDIR`` in it
   becomes the proc's coordinates, ``hosts_0_gpus_1``);
5. the procs are stopped, whether the command ran or raised (the stop is awaited
   before the Future resolves or raises).

Every proc also gets ``MONARCH_RANK_<dim>`` / ``MONARCH_SIZE_<dim>`` for each dimension
of its mesh.  Bad arguments (``cmd`` not a non-empty list of str, both ``rank`` and
``point``) raise ``TypeError``/``ValueError`` naming them before anything starts.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile

from monarch_cy._actor.base import returns_future  # noqa: F401  (makes Future._from_coro)
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.model.actor import Actor, context
from monarch_cy._actor.model.endpoint import endpoint

__all__ = ["exec_command", "BashActor"]


def _rank_env() -> dict:
    rank = context().actor_instance.rank
    ext = rank.extent
    env = {f"MONARCH_RANK_{k}": str(v) for k, v in dict(rank).items()}
    env.update({f"MONARCH_SIZE_{k}": str(v) for k, v in zip(ext.labels, ext.sizes)})
    return env


def _output_dir(output_dir: str | None) -> str | None:
    if output_dir is None or "$SUBDIR" not in output_dir:
        return output_dir
    sub = "_".join(f"{k}_{v}" for k, v in dict(context().actor_instance.rank).items())
    return output_dir.replace("$SUBDIR", sub)


def _run(argv: list, env: dict, cwd: str | None, output_dir: str | None) -> dict:
    """Run ``argv``; its return code and, without ``output_dir``, its output."""
    if output_dir is None:
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd)
        return {"returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr}
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "stdout.txt"), "w") as out, \
            open(os.path.join(output_dir, "stderr.txt"), "w") as err:
        r = subprocess.run(argv, stdout=out, stderr=err, env=env, cwd=cwd)
    return {"returncode": r.returncode, "stdout": "", "stderr": ""}


class BashActor(Actor):
    """Runs a bash script (:meth:`run`) or a Python program (:meth:`run_python`) in
    a child process of its proc; each returns ``{"returncode", "stdout",
    "stderr"}`` (output empty when written to ``output_dir``)."""

    @endpoint
    def run(self, script: str, target_ranks: list | None = None,
            output_dir: str | None = None) -> dict:
        """Run ``script`` with bash (skipped, return code 0, on a rank not in
        ``target_ranks`` when that is given)."""
        if target_ranks is not None and \
                context().actor_instance.rank.rank not in target_ranks:
            return {"returncode": 0, "stdout": "", "stderr": "", "skipped": True}
        with tempfile.NamedTemporaryFile("w", suffix=".sh") as f:
            f.write(script)
            f.flush()
            return _run(["bash", f.name], {**os.environ, **_rank_env()}, None,
                        _output_dir(output_dir))

    @endpoint
    def run_python(self, cmd: list, env: dict | None = None, workdir: str | None = None,
                   client_cwd: str | None = None, output_dir: str | None = None) -> dict:
        """Run ``cmd`` (``[file.py, args...]`` or ``["-m", module, args...]``) with this
        proc's Python, in ``workdir``, else the client's working directory when it
        exists here."""
        cwd = workdir or (client_cwd if client_cwd and os.path.isdir(client_cwd) else None)
        return _run([sys.executable, *cmd], {**os.environ, **_rank_env(), **(env or {})},
                    cwd, _output_dir(output_dir))


def _script(cmd: list, env: dict | None, workdir: str | None) -> str:
    lines = ["#!/bin/bash"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    cwd = os.getcwd()
    if workdir:
        lines.append(f"cd {shlex.quote(workdir)}")
    else:
        lines.append(f"[ -d {shlex.quote(cwd)} ] && cd {shlex.quote(cwd)}")
    lines.append(shlex.join(cmd))
    return "\n".join(lines) + "\n"


def _check(cmd, env, rank, point) -> None:
    if isinstance(cmd, (str, bytes)) or not isinstance(cmd, (list, tuple)) or not cmd \
            or not all(isinstance(c, str) for c in cmd):
        raise TypeError(f"cmd must be a non-empty list of str, not {cmd!r}")
    if env is not None and not (isinstance(env, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise TypeError(f"env must be a dict of str -> str, not {env!r}")
    if rank is not None and point is not None:
        raise ValueError(f"give rank= or point=, not both (rank={rank!r}, point={point!r})")


def exec_command(host_mesh, cmd: list, env: dict | None = None, workdir: str | None = None,
                 output_dir: str | None = None, rank: int | None = None,
                 point: dict | None = None, per_host: dict | None = None) -> Future:
    """Run ``cmd`` on ``host_mesh``; a lazy ``Future`` of the largest return code
    (module docstring)."""
    _check(cmd, env, rank, point)
    cmd = list(cmd)

    async def run() -> int:
        if point is not None:
            hosts = host_mesh.slice(**point)
        elif rank is not None:
            hosts = host_mesh.flatten("rank").slice(rank=rank)
        else:
            hosts = host_mesh
        procs = hosts.spawn_procs(per_host=per_host)
        try:
            actors = procs.spawn("BashActor", BashActor)
            if cmd[0].endswith(".py") or cmd[0] == "-m":
                results = await actors.run_python.call(
                    cmd, env=env, workdir=workdir, client_cwd=os.getcwd(),
                    output_dir=output_dir)
            else:
                results = await actors.run.call(_script(cmd, env, workdir),
                                                output_dir=output_dir)
            worst = 0
            for _, res in (results.items() if hasattr(results, "items") else results):
                worst = max(worst, res.get("returncode", 1))
                if output_dir is None:
                    if res.get("stdout"):
                        print(res["stdout"], end="")
                    if res.get("stderr"):
                        print(res["stderr"], end="", file=sys.stderr)
            return worst
        finally:
            await procs.stop()

    return Future._from_coro(run())
