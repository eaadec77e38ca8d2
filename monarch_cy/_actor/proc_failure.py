"""Proc failures, for :mod:`.proc_mesh`: what the controller does when a proc exits or
goes silent.

Everything here runs in the controller's pump, once per proc incarnation: the proc's
pending calls end (:meth:`Node.proc_failed`), the other procs hear of it (PROC_DEAD),
and the failure goes to the restart policy or to the client (:mod:`.supervision`).
A proc that a respawn replaced, or one stopped on purpose, is not a failure.
"""

from __future__ import annotations

from monarch_cy._transport.protocol import PROC_DEAD, pack as _pack

__all__ = ["_addrs_on", "_broadcast_dead", "_proc_down", "_maybe_restart", "_on_exit",
           "_silent"]



class _LazyCtl:
    """``controller`` module, imported on first use (proc_mesh uses it too)."""

    def __getattr__(self, name):
        from monarch_cy._actor import controller
        return getattr(controller, name)


_ctl = _LazyCtl()


def _describe(code: int) -> str:
    import signal
    # Monarch's wording, with the signal's name added
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return (f"the process this actor was running on failed: Killed(sig={-code}) "
                f"(signal {name})")
    return f"the process this actor was running on failed: exited with non-zero code {code}"


def _addrs_on(st, g: int, proc) -> tuple:
    """Every address a proc at global rank ``g`` binds (besides its key)."""
    out = [proc.daddr] if proc.daddr else []
    out += [rec.where[g][0] for rec in st.meshes if g in rec.where]
    return tuple(out)


def _broadcast_dead(node, proc, cause: str, addrs) -> None:
    msg = _pack((PROC_DEAD, proc.key, cause, addrs))
    for other in list(_ctl.LIVE_PROCS.values()):
        if other.key != proc.key and other.popen is not None:
            node.send(other.key, [msg])


def _proc_down(node, proc, cause: str) -> None:
    """A proc failed (died, or went silent): runs in the pump, once per incarnation.
    Ends its pending calls, tells the other procs, and reports the failure to the
    client (see :mod:`.supervision`), or lets the restart policy respawn it."""
    if proc.reported:
        return
    proc.reported = True
    from monarch_cy._actor import supervision
    st = proc.state
    addrs = _addrs_on(st, proc.rank, proc)
    ended = node.proc_failed(proc.key, cause, addrs)
    _broadcast_dead(node, proc, cause, addrs)
    if st.stopped:
        return
    st.failed_ranks.add(proc.rank)
    names = [rec.name for rec in st.meshes if proc.rank in rec.where]
    failure = supervision.MeshFailure(
        st.name, (proc.rank,), cause, "proc",
        f"actor meshes on it: {', '.join(names) or 'none'}", addrs=(proc.key,))
    handled = _maybe_restart(node, st, failure)
    if st.supervisor is not None and not handled:
        from monarch_cy._actor.actor_host import post_to
        post_to(node, st.supervisor, "__supervise__", failure)   # the asking actor's
        return
    supervision.client_failure(node, failure, (proc.key,), st, handled or ended > 0)


def _maybe_restart(node, st, failure) -> bool:
    """Start a policy respawn of ``st``'s failed ranks; True if the policy took it."""
    pol = st.policy
    if pol is None or st.stopped or st.restarts >= pol.max_restarts:
        return False
    st.restarts += 1
    from monarch_cy._actor import respawn
    respawn.start(node, st, None, pol.delay(st.restarts), policy=True)
    return True


def _on_exit(node, proc, code: int) -> None:
    """Runs in the pump when a proc exits (reported by the launcher)."""
    try:
        if _ctl.LIVE_PROCS.get(proc.key) is proc:
            del _ctl.LIVE_PROCS[proc.key]
        st = proc.state
        if proc.replaced:
            pass                      # a respawn killed it and owns what follows
        elif st.stopped:
            cause = "proc mesh stopped"
            addrs = _addrs_on(st, proc.rank, proc)
            node.proc_failed(proc.key, cause, addrs)
            _broadcast_dead(node, proc, cause, addrs)
        else:
            _proc_down(node, proc, _describe(code))
        proc.alive = False
        st.stop_waiting.discard(proc)
        if st.stop_future is not None and not st.stop_waiting:
            st.stop_future._set_result(None)
    finally:
        proc.done.set()


def _silent(node, proc, cause: str) -> None:
    """Heartbeat timeout (in the pump): fail the proc now, then kill it."""
    _proc_down(node, proc, cause)
    try:
        proc.popen.kill()
    except OSError:
        pass
