"""monarch_cy's stand-ins for names of Monarch's private modules that libraries use.

The module paths that expose them (``monarch._src.actor.actor_mesh._context``,
``monarch._src.actor.mock.patch_actor``...) are listed in :mod:`._paths`; this
module holds the few that are code rather than another name for a monarch_cy
object:

* :data:`context_var` -- Monarch's ``actor_mesh._context`` ContextVar, read-only:
  ``get()`` is None until this process has a Monarch context (an actor runs here, or
  the actor runtime was started), then the :func:`~monarch_cy.actor.context`;
* :class:`TracingForwarder` -- a ``logging.Handler`` that tags each record with
  ``actor_id`` and forwards it nowhere (monarch_cy has no tracing backend);
* :class:`patch_actor` -- Monarch's actor mock: while active, ``ProcMesh.spawn`` of
  the original class spawns the mock;
* :data:`IN_PAR` -- Monarch's "running from a Meta PAR archive" flag: always False
  here (monarch_cy is a pip package);
* :data:`WORKER_BOOTSTRAP_SCRIPT` -- the ``python -c`` program of a worker pod: a
  worker loop serving ``attach_to_workers`` on ``$MONARCH_PORT``;
* :func:`hold_gil_for_test` -- the test helper of Monarch's extension that holds the
  GIL in a background thread without ever releasing it.

Importing it imports only the standard library; the actor runtime is reached at
first use.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import textwrap
import threading
from typing import Any, Callable, Dict, Optional

__all__ = ["context_var", "TracingForwarder", "patch_actor", "get_actor_class",
           "WORKER_BOOTSTRAP_SCRIPT", "IN_PAR", "hold_gil_for_test"]

#: ``actor_mesh.IN_PAR``: Monarch runs from a PAR archive at Meta; never here.
IN_PAR = False


# -- actor_mesh._context -----------------------------------------------------------------

class _ContextVarView:
    """Reads like Monarch's ``contextvars.ContextVar[Optional[Context]]`` named
    ``monarch.actor_mesh._context`` (only ``get`` and ``name``).

    Monarch's holds None until the process first needs a context (the client's is made
    by its first actor-API call; an actor's is set before its code runs).  Here:
    inside an actor, or once this process's actor runtime is running (a worker
    proc, or a controller that spawned procs), ``get()`` is
    :func:`monarch_cy.actor.context`; before that it is None (or ``default``).
    Libraries use ``_context.get() is not None`` to ask "is this process already
    running inside Monarch?".
    """

    name = "monarch.actor_mesh._context"

    def get(self, *default):
        if len(default) > 1:
            raise TypeError(f"get expected at most 1 argument, got {len(default)}")
        from monarch_cy._actor.base import state  # deferred: import time (runtime)
        from monarch_cy._transport.current import current_node  # deferred: as above
        if (getattr(state.local, "instance", None) is not None
                or current_node() is not None):
            from monarch_cy.actor import context  # deferred: as above
            return context()
        return default[0] if default else None

    def __repr__(self) -> str:
        return f"<monarch_cy stand-in for ContextVar {self.name!r}>"


context_var = _ContextVarView()


# -- telemetry.TracingForwarder --------------------------------------------------------

class TracingForwarder(logging.Handler):
    """Monarch's handler that forwards log records to its tracing (OpenTelemetry)
    pipeline.  monarch_cy has no such pipeline: the record gets ``actor_id`` (the
    calling actor's id, as Monarch's does) and goes no further.  Add your own
    handler to see records."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from monarch_cy.actor import current_actor_name  # deferred: import time
            record.actor_id = current_actor_name()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - as Monarch's: never fail a log call
            pass


# -- mock.patch_actor ----------------------------------------------------------------------

_registry: Dict[type, type] = {}
_hook_lock = threading.Lock()
_hooked = False


def get_actor_class(cls: type) -> type:
    """The class ``spawn`` uses for ``cls``: its mock while one is active, else
    ``cls``."""
    return _registry.get(cls, cls)


def _hook_spawn() -> None:
    """Make ``ProcMesh.spawn`` consult the mock registry (once per process)."""
    global _hooked
    with _hook_lock:
        if _hooked:
            return
        from monarch_cy._actor.meshes.proc_mesh import ProcMesh  # deferred: runtime
        original = ProcMesh.spawn

        @functools.wraps(original)
        def spawn(self, name, Class, *args, **kwargs):
            return original(self, name, _registry.get(Class, Class), *args, **kwargs)

        ProcMesh.spawn = spawn   # type: ignore[method-assign]
        _hooked = True


class patch_actor:
    """Monarch's ``patch_actor(original, mock)``, like ``unittest.mock.patch``: while
    active (``with``, ``async with``, or as a decorator of a function or coroutine
    function), ``proc_mesh.spawn(name, original, ...)`` spawns ``mock`` instead
    (``get_or_spawn_controller`` too).  Patches nest; leaving one restores the
    previous mock.  ``__enter__`` returns the mock class.

    Difference: Monarch also ships the registry to the procs it starts, so actors
    there spawning ``original`` get the mock; here it applies to spawns made by this
    process (the controller).
    """

    def __init__(self, original: type, mock: type) -> None:
        self.original = original
        self.mock = mock
        self._previous: Optional[type] = None

    def __enter__(self) -> type:
        _hook_spawn()
        self._previous = _registry.get(self.original)
        _registry[self.original] = self.mock
        return self.mock

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            _registry[self.original] = self._previous
        else:
            _registry.pop(self.original, None)

    async def __aenter__(self) -> type:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(func):
            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with self:
                    return await func(*args, **kwargs)
            return async_wrapper

        @functools.wraps(func)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)
        return sync_wrapper


# -- job.kubernetes._WORKER_BOOTSTRAP_SCRIPT ---------------------------------------------

#: ``python -u -c WORKER_BOOTSTRAP_SCRIPT`` in a worker pod, as Monarch's: a worker loop
#: (``monarch_cy.actor.run_worker_loop_forever``) serving ``attach_to_workers`` on
#: ``tcp://<fqdn>:$MONARCH_PORT`` (default 26600).  The pod needs the job secret
#: (``MONARCH_CY_JOB_SECRET_FILE`` or ``MONARCH_CY_JOB_SECRET``): monarch_cy
#: authenticates hosts with it where Monarch's script trusts every connection.
WORKER_BOOTSTRAP_SCRIPT: str = textwrap.dedent("""\
    import os
    import socket
    from monarch_cy.actor import run_worker_loop_forever
    port = os.environ.get("MONARCH_PORT", "26600")
    hostname = socket.getfqdn()
    run_worker_loop_forever(address=f"tcp://{hostname}:{port}",
                            ca="trust_all_connections")
""")


# -- actor_mesh.hold_gil_for_test (monarch._rust_bindings) --------------------------------

def hold_gil_for_test(delay_secs: float = 0.0, hold_secs: float = 0.0) -> None:
    """Start a daemon thread that waits ``delay_secs``, then holds the GIL for
    ``hold_secs`` without releasing it once (Python code releases it every
    switch interval; this sleeps in C through a ``ctypes.PyDLL`` call, which keeps
    the GIL).  Returns at once.  For tests of how the runtime copes with a stalled
    interpreter, as Monarch's."""
    import ctypes  # deferred: import time (a test helper)
    import time
    for name, v in (("delay_secs", delay_secs), ("hold_secs", hold_secs)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise ValueError(f"{name} must be a number of seconds >= 0, not {v!r}")
    usleep = ctypes.PyDLL(None).usleep          # PyDLL: the GIL stays held
    usleep.argtypes = [ctypes.c_uint]

    def hold():
        time.sleep(delay_secs)
        left = float(hold_secs)
        while left > 0:                         # usleep takes at most ~4295 s
            step = min(left, 1.0)
            usleep(int(step * 1e6))
            left -= step
    threading.Thread(target=hold, daemon=True, name="hold-gil-for-test").start()
