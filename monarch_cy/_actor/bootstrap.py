"""Entry point of every proc: ``python -m monarch_cy._actor.bootstrap``.

The controller writes a JSON config (job secret, addresses, ranks, ``sys.path``) to
the proc's stdin: the secret is never on a command line nor in the environment.
The per-rank environment (``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``,
``MONARCH_CY_RANK``...) is in place before any user code runs.  Nothing here
imports torch.

Two roles (see :mod:`.launch.launcher`):

* worker: the main thread pumps the proc's inbox forever with the handlers of
  :mod:`.wiring`; it exits on STOP (after flushing queued messages, at most ~1 s;
  :mod:`.host.stopping`) or as soon as the controller dies;
* zygote (first config line has ``"zygote": true``): imports the runtime once, then
  forks one worker per request line, reporting ``forked``/``exit`` lines on its
  status pipe; it exits when its stdin closes.

No orphans: the zygote asks the kernel for SIGTERM when its parent (the controller's
launcher thread, which lives as long as the controller) dies; on it, it SIGKILLs and
reaps its workers, removes the job's run directory and exits.  Every worker asks for
SIGKILL when its parent (the zygote, or the controller in exec mode) dies, and also
watches the controller's pid.  So a controller killed with SIGKILL leaves nothing
behind within a fraction of a second.
"""

from __future__ import annotations

import json
import os
import sys
import threading


def _pdeathsig(sig: int) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)      # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the pid watch still works
        pass


def _exit_proc():
    """The STOP exception (``host.stopping.ExitProc``), or a class nothing raises
    when the runtime has not loaded."""
    mod = sys.modules.get("monarch_cy._actor.host.stopping")
    return mod.ExitProc if mod is not None else _NeverRaised


class _NeverRaised(BaseException):
    pass


def _allow_tracer(pid) -> None:
    """Let ``pid`` (the controller or host agent) and its children ptrace this proc
    under Yama's ptrace_scope 1: the py-spy of ``dump_stacks`` (monarch_cy._stacks)."""
    if not pid:
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(0x59616D61, int(pid), 0, 0, 0)  # PR_SET_PTRACER
    except Exception:  # noqa: BLE001 - not Linux, or no Yama: nothing to allow
        pass


def _capture_stdio(paths) -> None:
    """Put fds 1 and 2 on the FIFOs the controller reads (``cfg["stdio"]``, see
    :mod:`.launch.proc_output`), before anything else writes; child processes
    inherit them.  A FIFO that cannot be opened (its reader is gone) leaves that fd
    as it was."""
    for fd, path in zip((1, 2), paths):
        try:
            w = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        os.set_blocking(w, True)      # a full pipe makes writers wait, never fail
        os.dup2(w, fd)                # (dup2's copy is inherited by children)
        os.close(w)


def worker_main(cfg: dict) -> None:
    """Run a worker with ``cfg`` until STOP or the controller's death; never returns.
    On STOP it raises ``ExitProc``, which its caller lets end the program normally
    (exit status 0 after the interpreter's finalization)."""
    if cfg.get("stdio"):
        _capture_stdio(cfg["stdio"])
    try:
        sys.path[:] = list(cfg["sys_path"]) + [p for p in sys.path
                                               if p not in cfg["sys_path"]]
        if cfg.get("compat"):
            # The controller runs a Monarch program (monarch_cy.compat): user modules
            # unpickled here may say "from monarch.actor import ...".
            from monarch_cy.compat import install
            install(shadow=True)
        # deferred: sys.path and compat must be in place before the runtime loads
        from monarch_cy._actor import wiring
        from monarch_cy._errors import ActorError
        from monarch_cy._transport.auth import JobKeys
        from monarch_cy._transport.node import Node, set_node
        import signal
        _pdeathsig(signal.SIGKILL)
        _allow_tracer(cfg.get("controller_pid"))
        if cfg.get("bind"):
            from monarch_cy._actor.launch.proc_bind import apply  # deferred: as above
            apply(cfg["bind"])
        if cfg.get("setup"):
            from monarch_cy._actor.host import proc_setup  # deferred: as above
            proc_setup.arm()
        parent = cfg.get("_parent")
        if (parent and os.getppid() != parent) or os.getppid() == 1:
            os._exit(1)                    # the parent died before prctl took effect
        node = Node(cfg["addr"], JobKeys(bytes.fromhex(cfg["secret"])),
                    rundir=cfg["rundir"], is_controller=False, direct_addr=cfg["daddr"],
                    remote_error=ActorError)
        set_node(node)
        wiring.install_worker(node, cfg)
        node.serve_forever()
    except _exit_proc():
        raise                              # STOP: the program ends normally (finalizes)
    except BaseException:
        from monarch_cy._log import logger  # deferred: import time (logging)
        logger("actor").exception("this proc's runtime failed; exiting with status 70")
        os._exit(70)
    os._exit(0)


def _devnull_stdin() -> None:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)


def zygote_main(first: dict, stdin) -> None:
    """Fork workers on request; report forks and exits; exit when stdin closes."""
    import selectors
    # Import what every worker needs, once, before any fork.
    if first.get("zmq", True):
        import zmq  # noqa: F401  (imported once, before any fork; unix:// needs none)
    import importlib
    # deferred: the fork server imports the runtime here, once, before any fork
    from monarch_cy._actor.wiring import WORKER_MODULES
    for name in WORKER_MODULES:
        importlib.import_module(name)
    import gc
    import signal
    gc.freeze()        # workers' collections skip what they inherit: fewer COW faults
    status = first["status_fd"]
    children = set()

    def parent_died(signum, frame):
        # The controller is gone: take every worker down with us (its run directory
        # is removed by its reaper, monarch_cy._actor.launch.rundir).
        # Stdin's EOF and the parent-death SIGTERM both come here: the first one wins
        # (a SIGTERM arriving mid-way must not re-enter, e.g. inside an import).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in list(children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        os._exit(0)
    signal.signal(signal.SIGTERM, parent_died)
    _pdeathsig(signal.SIGTERM)
    if first.get("controller_pid") and os.getppid() != first["controller_pid"]:
        parent_died(0, None)
    me = os.getpid()
    sel = selectors.DefaultSelector()
    in_fd = stdin.fileno()
    os.set_blocking(in_fd, False)
    sel.register(in_fd, selectors.EVENT_READ, None)
    buf = b""

    def report(line: str) -> None:
        os.write(status, line.encode() + b"\n")

    while True:
        for key, _ in sel.select():
            if key.data is None:
                try:
                    chunk = os.read(in_fd, 1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    # EOF: the controller is gone.  This can be seen before the
                    # parent-death SIGTERM arrives; clean up the same way.
                    parent_died(0, None)
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    req = json.loads(line)
                    req["cfg"]["_parent"] = me
                    pid = os.fork()
                    if pid == 0:
                        stopped = False
                        try:
                            signal.signal(signal.SIGTERM, signal.SIG_DFL)
                            sel.close()
                            os.close(in_fd)
                            os.close(status)
                            _devnull_stdin()
                            os.environ.clear()
                            os.environ.update(req["env"])
                            worker_main(req["cfg"])
                        except BaseException as e:
                            stopped = isinstance(e, _exit_proc())
                        finally:
                            if not stopped:
                                os._exit(70)
                        raise _WorkerStopped   # out of the fork server's loop, to main()
                    children.add(pid)
                    pfd = os.pidfd_open(pid)
                    sel.register(pfd, selectors.EVENT_READ, pid)
                    report(f"forked {req['id']} {pid}")
            else:
                pid = key.data
                sel.unregister(key.fd)
                os.close(key.fd)
                _, st = os.waitpid(pid, 0)
                children.discard(pid)
                code = os.waitstatus_to_exitcode(st)
                report(f"exit {pid} {code}")


def _read_line(fd: int) -> bytes:
    # Unbuffered, so that no later request line is swallowed by a buffer.
    out = bytearray()
    while True:
        b = os.read(fd, 1)
        if not b or b == b"\n":
            return bytes(out)
        out += b


class _WorkerStopped(BaseException):
    """A worker forked by the fork server was stopped: unwind to :func:`main`."""


def main() -> None:
    """A worker (or the fork server, whose forked children are workers).  A worker
    stopped on purpose returns from here, so that Python ends the program as usual:
    ``atexit`` handlers and the interpreter's finalization run, then status 0."""
    line = _read_line(0)
    cfg = json.loads(line)
    try:
        if cfg.get("zygote"):
            zygote_main(cfg, sys.stdin.buffer)
            return
        _devnull_stdin()
        worker_main(cfg)
    except _WorkerStopped:
        return
    except BaseException as e:
        if isinstance(e, _exit_proc()):
            return
        raise


if __name__ == "__main__":
    main()
