"""``shutdown_context()``: end this process's part of the job, as Monarch's does.

In the client it stops every proc mesh still running (each actor's ``__cleanup__``
runs; procs get STOP, then SIGKILL after a grace period), reaps every child and
stops the fork server; the controller's own node stays usable for ``this_proc()``
actors until interpreter exit, which is where it is torn down anyway.  In a worker
it stops the proc meshes that worker started.

Idempotent: later calls return an already-resolved Future.  Non-blocking: the work
runs in a helper thread; ``.get()`` (or ``await``) waits for it.
"""

from __future__ import annotations

import threading

from monarch_cy._checks import check_timeout
from monarch_cy._actor.base.future import Future
from monarch_cy._transport.current import current_node

__all__ = ["shutdown_context"]

_done = None
_lock = threading.Lock()


def shutdown_context(host_timeout: float | None = None):
    """Stop every proc mesh this process started; ``Future[None]`` when done.

    ``host_timeout``: seconds each proc is given to stop before it is killed
    (default 2)."""
    host_timeout = check_timeout("host_timeout", host_timeout, allow_zero=True,
                                 allow_none=True)
    grace = 2.0 if host_timeout is None else host_timeout
    global _done
    with _lock:
        if _done is not None:
            return _done
        fut = _done = Future._make(None)

    def run():
        try:
            if current_node() is not None:
                # deferred: import time (stopping loads with the runtime)
                from monarch_cy._actor.meshes.proc_stop import stop_all
                stop_all(grace=grace)
        except BaseException as e:  # noqa: BLE001 - delivered to the caller
            fut._set_exception(e)
        else:
            fut._set_result(None)
    threading.Thread(target=run, daemon=True, name="monarch_cy-shutdown").start()
    return fut
