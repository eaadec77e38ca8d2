"""How a proc is started: Monarch's ``BootstrapCommand`` and its per-coordinate hook.

``HostMesh.spawn_procs(..., bootstrap_command=cmd)`` takes one
:class:`BootstrapCommand` for every proc, or a callable ``point -> BootstrapCommand``
called once per proc with its :class:`Point` over the combined host and per-host
extent (on the controller, before the proc starts; an exception or a wrong return
type is raised from ``spawn_procs``, naming the point, and nothing is started).

Semantics of a command:

* ``env`` goes on top of everything else the proc gets (the controller's
  environment, ``spawn_procs(env=...)``, the torchrun variables and the pinned
  ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``), except the runtime's own
  ``MONARCH_CY_RANK``/``MONARCH_CY_WORLD_SIZE``: it is the escape hatch for
  whatever the defaults do not cover (NUMA pinning variables, NCCL knobs per rank,
  a device list of your own).
* ``program``, ``arg0`` and ``args``: the process to execute.  The default
  (:func:`default_bootstrap_cmd`) is this Python running
  ``-m monarch_cy._actor.bootstrap``; procs with the default command are forked
  from the fork server as usual, and so are commands naming Monarch's
  ``-m monarch._src.actor.bootstrap_main``, which means ours.  Any other command is executed (``execve``) with
  its standard input carrying the proc's configuration: it must end up running
  ``python -m monarch_cy._actor.bootstrap`` with that standard input, e.g. a
  wrapper ``numactl --cpunodebind=1 python -m monarch_cy._actor.bootstrap`` or a
  shell script ending in ``exec python -m monarch_cy._actor.bootstrap``.
  ``arg0`` (default: ``program``) is the ``argv[0]`` the program sees.  A respawn
  starts the same command again.  On remote hosts (agents) only ``env`` may differ
  from the default: the agent forks every proc from its own fork server.

Commands are immutable values; :meth:`BootstrapCommand.with_env` returns a copy.
"""

from __future__ import annotations

import sys
from typing import Callable, Mapping, Sequence

__all__ = ["BootstrapCommand", "default_bootstrap_cmd", "resolve_bootstrap"]

_BOOTSTRAP_ARGS = ("-m", "monarch_cy._actor.bootstrap")
# Monarch's docs start procs with this module: it means our bootstrap here.
_MONARCH_BOOTSTRAP = {"monarch._src.actor.bootstrap_main": "monarch_cy._actor.bootstrap"}


def _check_env(env, what: str) -> dict:
    if not isinstance(env, Mapping):
        raise TypeError(f"{what} must be a mapping of str to str, not {env!r}")
    for k, v in env.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"{what} must map str to str; {k!r}: {v!r} is not")
        if not k or "=" in k or "\0" in k or "\0" in v:
            raise ValueError(f"{what} has an invalid variable name or value: {k!r}")
    return dict(env)


class BootstrapCommand:
    """The program, ``argv[0]``, arguments and environment a proc is started with
    (Monarch's ``BootstrapCommand(program, arg0, args, env)``)."""

    __slots__ = ("_program", "_arg0", "_args", "_env")

    def __init__(self, program: str, arg0: str | None = None,
                 args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        if not isinstance(program, str) or not program or "\0" in program:
            raise ValueError(f"program must be a non-empty str, not {program!r}")
        if arg0 is not None and (not isinstance(arg0, str) or "\0" in arg0):
            raise ValueError(f"arg0 must be a str or None, not {arg0!r}")
        if isinstance(args, (str, bytes)) or not all(isinstance(a, str) for a in args):
            raise TypeError(f"args must be a list of str, not {args!r}")
        self._program, self._arg0, self._args = program, arg0, tuple(args)
        self._env = _check_env({} if env is None else env, "env")

    program = property(lambda self: self._program)
    arg0 = property(lambda self: self._arg0)
    args = property(lambda self: list(self._args))
    env = property(lambda self: dict(self._env))

    def with_env(self, env: Mapping[str, str]) -> "BootstrapCommand":
        """A copy with ``env`` merged on top of this command's environment."""
        return BootstrapCommand(self._program, self._arg0, self._args,
                                {**self._env, **_check_env(env, "env")})

    def argv(self) -> list[str]:
        """``[arg0 or program, *args]``: what the started program sees as ``sys.argv``
        (Monarch's ``-m monarch._src.actor.bootstrap_main`` becomes ours)."""
        args = list(self._args)
        for i in range(len(args) - 1):
            if args[i] == "-m" and args[i + 1] in _MONARCH_BOOTSTRAP:
                args[i + 1] = _MONARCH_BOOTSTRAP[args[i + 1]]
        return [self._arg0 or self._program, *args]

    def is_default_program(self) -> bool:
        """Whether this runs this Python's bootstrap module (so the proc can be
        forked from the fork server)."""
        return (self._program == sys.executable and self._arg0 in (None, sys.executable)
                and tuple(self.argv()[1:]) == _BOOTSTRAP_ARGS)

    def __eq__(self, other) -> bool:
        return (isinstance(other, BootstrapCommand) and
                (self._program, self._arg0, self._args, self._env) ==
                (other._program, other._arg0, other._args, other._env))

    def __hash__(self) -> int:
        return hash((self._program, self._arg0, self._args,
                     tuple(sorted(self._env.items()))))

    def __reduce__(self):
        return (BootstrapCommand, (self._program, self._arg0, self._args, self._env))

    def __repr__(self) -> str:
        return (f"BootstrapCommand(program={self._program!r}, arg0={self._arg0!r}, "
                f"args={list(self._args)!r}, env={self._env!r})")


def default_bootstrap_cmd() -> BootstrapCommand:
    """The command procs are started with by default: this Python, ``-m
    monarch_cy._actor.bootstrap``, no extra environment."""
    return BootstrapCommand(sys.executable, None, _BOOTSTRAP_ARGS, {})


def resolve_bootstrap(bootstrap_command, point) -> BootstrapCommand | None:
    """The command for the proc at ``point`` (None: the default one)."""
    if bootstrap_command is None:
        return None
    if isinstance(bootstrap_command, BootstrapCommand):
        return bootstrap_command
    if not callable(bootstrap_command):
        raise TypeError("bootstrap_command must be a BootstrapCommand, a callable "
                        f"point -> BootstrapCommand, or None, not {bootstrap_command!r}")
    fn: Callable = bootstrap_command
    try:
        cmd = fn(point)
    except Exception as e:
        raise ValueError(f"bootstrap_command raised for point {point}: "
                         f"{type(e).__name__}: {e}") from e
    if not isinstance(cmd, BootstrapCommand):
        raise TypeError(f"bootstrap_command returned {cmd!r} for point {point}; "
                        "expected a BootstrapCommand")
    return cmd
