"""An actor's failure, supervision and stop, inside its proc: the half of
:class:`~.actor_host.ActorHost` that runs when something ends.

* an endpoint raised (:meth:`ActorFailure._fail`): the caller gets an
  :class:`ActorError`, or the actor *fails* (see :mod:`.actor_host` for when), after
  a post-mortem debugger session if a breakpoint paused that call;
* the actor fails (:meth:`~ActorFailure._die`): ``__cleanup__(exc)``, then its owner
  hears of it (another actor of this proc through ``__supervise__``, an actor
  elsewhere or the client through ``SUPERVISE``), and every later call is answered
  with its ``SupervisionError`` (:meth:`~ActorFailure._when_failed`), a client's call
  also bounced back as undeliverable (``UNDELIVERABLE``, Monarch's);
* a child mesh failed (``__supervise__``, :meth:`~ActorFailure._supervise`): a truthy
  answer handles it, anything else fails this actor in turn, named as Monarch names it;
* the actor stops (``__stop__``, ``__stop_mesh__``, ``context().actor_instance.stop``):
  the meshes it spawned stop first, then ``__cleanup__(None)``, then its running tasks
  are cancelled.

Everything here runs on the actor's own thread (``post`` and ``abort`` from any).
"""

from __future__ import annotations

import pickle
import threading
import time
import traceback

from monarch_cy import _config
from monarch_cy._errors import ActorError, MeshStoppedError, SupervisionError
from monarch_cy._log import logger
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.failure import MeshFailure, failure_mesh_name
from monarch_cy._actor.host.supervise_call import call_with_timeout, supervise_timeout
from monarch_cy._actor.model.actor import _debugged, _message, post_to
from monarch_cy._transport import fanout, wire
from monarch_cy._transport.protocol import SEEN, SUPERVISE, UNDELIVERABLE, pack

__all__ = ["ActorFailure", "format_exc", "one_line", "picklable"]

HOSTS = _state.HOSTS  # actor address -> ActorHost, in this process
_log = logger("actor")


def format_exc(exc) -> str:
    """``exc`` with its traceback, as Python prints it."""
    try:
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # noqa: BLE001 - a broken __str__: name the type at least
        return f"{type(exc).__qualname__}: <str() failed>\n"


def _mesh_stop_text(reason: str) -> str:
    """Why a stopped actor mesh's actors refuse calls (Monarch's words), with the
    caller's reason when it gave one."""
    text = "ActorMeshController received explicit stop request"
    return text if reason in ("", "stopped by client") else f"{text} ({reason})"


def one_line(exc) -> str:
    """``Type: text`` of ``exc`` on one line (its type alone when the text is empty)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = "<str() failed>"
    return f"{type(exc).__qualname__}: {text}" if text else type(exc).__qualname__


def picklable(exc):
    """``exc`` if the transport can carry it (its pickler: classes of the
    controller's ``__main__`` travel by value), else None."""
    try:
        data, bufs = wire.dumps(exc)
        wire.loads(data, bufs)
        return exc
    except Exception:  # noqa: BLE001 - any failure means it cannot travel
        return None


def _cancel_tasks(loop, stopped) -> None:
    """Cancel the actor's running tasks; set ``stopped`` once all have ended."""
    import asyncio  # deferred: import time (only async actors need asyncio)
    tasks = list(asyncio.all_tasks(loop))
    if not tasks:
        stopped.set()
        return

    def ended(_):
        if all(t.done() for t in tasks):
            stopped.set()
    for task in tasks:
        task.cancel("actor stopped")
        task.add_done_callback(ended)


class ActorFailure:
    """Mixed into :class:`~.actor_host.ActorHost`, whose state it uses: ``node``,
    ``name``, ``rank``, ``addr``, ``owner``, ``who``, ``inst``, ``actor``,
    ``failed``, ``cleaned``, ``stopped``, ``children``."""

    def abort(self, reason) -> None:
        """``context().actor_instance.abort(reason)``: fail this actor now."""
        self._die(f"actor explicitly aborted due to: {reason}" if reason else
                  "actor explicitly aborted", None)

    def stop(self, reason) -> None:
        """``context().actor_instance.stop(reason)``: stop this actor gracefully once
        the messages already queued for it are handled (as ``ActorMesh.stop``)."""
        self.post("__stop_mesh__", f"the actor stopped itself: {reason}" if reason else
                  "the actor stopped itself")

    def kill(self, reason) -> None:
        """``context().actor_instance.kill(reason)``: fail this actor now, without
        ``__cleanup__`` (never later either)."""
        self._die(f"actor killed: {reason}" if reason else "actor killed", None,
                  cleanup=False)
        self.cleaned.set()

    def _fail(self, e, raddr, port_id, rank, rkey, method, explicit=False) -> None:
        """An endpoint raised ``e`` (see the module docstring for what fails the
        actor).  The caller, if any, always gets an answer: the ActorError, or the
        actor's SupervisionError when the actor failed."""
        debugged = _debugged.get()
        if debugged is not None and debugged[0] is _message.get():
            _debugged.set(None)         # a breakpoint paused this call: post-mortem first
            debugged[1](e.__traceback__)
        tb = format_exc(e)
        if not port_id:
            self._die(f"actor explicitly aborted due to: {tb}", e)  # broadcast: nowhere to reply
        elif explicit:
            self._die(f"actor explicitly aborted due to: {tb}", e)  # the port is the endpoint's
        elif not isinstance(e, Exception):
            self._die(f"actor explicitly aborted due to: {tb}", e)  # not an Exception
        else:
            err = ActorError(picklable(e), tb, self.name, self.rank.rank, method)
            self.node.reply(raddr, port_id, rank, False, err, rkey)
            return
        if port_id:
            self.node.reply(raddr, port_id, rank, False, self.failed, rkey)

    # -- failure and supervision ----------------------------------------------
    def post(self, method: str, payload=None) -> None:
        """Queue a built-in message for this actor (thread-safe)."""
        post_to(self.node, self.addr, method, payload)

    def _die(self, cause: str, exc, details: str = "", cleanup: bool = True,
             children=(), kind: str = "actor") -> None:
        """This actor fails: ``__cleanup__(exc)``, then its owner hears of it.
        ``kind="unhandled"``: it failed because it did not handle its child's
        failure (``children[0]``); its callers then get the child's failure, named
        as the child, as Monarch's do."""
        if self.failed is not None:
            return
        failure = MeshFailure(failure_mesh_name(self.name, self.owner),
                              (self.rank.rank,), cause, kind, details,
                              children, (self.addr,), self.who)
        self.failed = failure.error() if kind in ("unhandled", "raised") else \
            SupervisionError(self.name, self.rank.rank, cause, who=self.who)
        if cleanup:
            self._cleanup(exc)
        self._report(failure)

    def _owner_who(self) -> str:
        """The name of the actor that spawned this one, when it runs in this proc
        (Monarch's failure texts chain them); else ``<root>``."""
        owner = self.owner
        up = HOSTS.get(owner[1]) if owner and owner[0] == "actor" else None
        return up.who if up is not None and up.who else "<root>"

    def _report(self, failure) -> None:
        owner = self.owner or ("client", getattr(self.node, "controller_addr", None)
                               or self.node.addr)
        try:
            if owner[0] == "actor" and owner[1] in HOSTS:
                HOSTS[owner[1]].post("__supervise__", failure)
            elif owner[0] == "actor":
                _log.error("actor %s: owner %s is gone; failure unreported:\n%s",
                           self.inst.actor_id, owner[1], failure.report())
            else:
                self.node.send(owner[1], [pack((SUPERVISE,), pickle.dumps(failure))])
        except Exception as e:  # noqa: BLE001 - never let reporting kill the thread
            _log.error("actor %s: cannot report its failure (%s):\n%s",
                       self.inst.actor_id, e, failure.report())

    def _stop_children(self) -> None:
        """Stop the actor meshes this actor spawned, and wait (at most
        ``supervise_timeout()`` in all) until they have: a stopped actor's
        descendants stop first, as Monarch's do.  Runs in a thread of its own (an
        async actor's loop, blocked here, must not be where the replies land)."""
        if not self.children:
            return
        t = threading.Thread(target=self._stop_children_now, daemon=True,
                             name=f"monarch_cy-stop-children-{self.name}")
        t.start()
        t.join(supervise_timeout() + 1.0)

    def _stop_children_now(self) -> None:
        kids, self.children = self.children, []
        futs = []
        for mesh in kids:
            try:
                futs.append(mesh.stop(f"its owner {self.inst.actor_id} stopped"))
            except Exception:  # noqa: BLE001 - already stopped, or its procs are
                pass
        deadline = time.monotonic() + supervise_timeout()
        for f in futs:
            try:
                f._wait(max(0.0, deadline - time.monotonic()))
            except Exception as e:  # noqa: BLE001 - a child that failed is stopped too
                _log.debug("actor %s: stopping a child mesh: %s", self.inst.actor_id, e)

    def _cleanup(self, exc) -> None:
        try:
            fn = getattr(type(self.actor), "__cleanup__", None) if self.actor is not None \
                else None
            if fn is not None:
                ok, v = call_with_timeout(lambda: fn(self.actor, exc),
                                          _config.cleanup_timeout(), self.inst)
                if not ok:
                    _log.error("actor %s: __cleanup__ failed: %s", self.inst.actor_id,
                               one_line(v))
        finally:
            self.cleaned.set()

    def _when_failed(self, method, data, extras, raddr, port_id, rank, rkey):
        if method in ("__stop__", "__stop_mesh__"):
            if not self.cleaned.is_set():
                self._cleanup(None if isinstance(self.failed, MeshStoppedError)
                              else self.failed)
            self.actor = None
            self.stopped.set()
            if port_id:
                self.node.reply(raddr, port_id, rank, True, None, rkey)
            return
        if method == "__supervise__":       # a failed owner: pass it up, chained
            failure = self.node.decode(data, extras)[0][0]
            self._report(MeshFailure(failure_mesh_name(self.name, self.owner),
                                     (self.rank.rank,),
                                     f"child mesh {failure.mesh_name} failed after this "
                                     f"actor had failed ({self.failed.cause})", "actor",
                                     "", (failure,), (self.addr,), self.who))
            return
        if raddr and not method.startswith("__"):   # Monarch bounces it to the caller
            why = "stopped" if isinstance(self.failed, MeshStoppedError) else "failed"
            f0 = pack((UNDELIVERABLE, port_id, f"{self.name}.{method.lstrip('!')}()",
                       f"{self.who}@{self.addr}", why, len(data)))
            # To a gathering forwarder, wrapped: it passes it up ahead of the reply.
            self.node.send(raddr, [fanout.pack_pass(port_id, f0) if fanout.gathers(raddr)
                                   else f0])
        if port_id:
            self.node.reply(raddr, port_id, rank, False, self.failed, rkey)
            if not self._seen_sent and not isinstance(self.failed, MeshStoppedError):
                self._seen_sent = True
                client = getattr(self.node, "controller_addr", None) or self.node.addr
                self.node.send(client, [pack((SEEN, self.addr))])

    def _builtin(self, method, data, extras, raddr, port_id, rank, rkey, loop=None):
        if method == "__ready__":
            if port_id:
                self.node.reply(raddr, port_id, rank, True, True, rkey)
        elif method in ("__stop__", "__stop_mesh__"):
            what = "stopped by client" if method == "__stop__" else \
                _mesh_stop_text(self.node.decode(data, extras)[0][0])
            self.failed = MeshStoppedError(self.name, self.rank.rank, what, who=self.who)
            self._stop_children()
            self._cleanup(None)
            if loop is not None:
                # Async endpoints still running are cancelled (their callers get
                # MeshStoppedError), after those started by earlier messages have
                # taken their first step (their steps are already scheduled);
                # stopped is set once they have ended (they hold the instance).
                loop.call_soon(_cancel_tasks, loop, self.stopped)
            self.actor = None          # its __del__ runs now, not at process exit
            if loop is None:
                self.stopped.set()
            if port_id:
                self.node.reply(raddr, port_id, rank, True, None, rkey)
        elif method == "__supervise__":
            failure = self.node.decode(data, extras)[0][0]
            self._supervise(failure)

    def _supervise(self, failure) -> None:
        fn = getattr(type(self.actor), "__supervise__", None)
        if fn is None:
            why = "it has no __supervise__"
        else:
            ok, v = call_with_timeout(lambda: fn(self.actor, failure), supervise_timeout(),
                                          self.inst)
            if ok and v:
                return
            if not ok and not isinstance(v, TimeoutError):
                # Monarch's: the owner fails with what its __supervise__ raised,
                # "while handling" the child's failure
                self._die(one_line(v), None, "", children=(failure,), kind="raised")
                return
            why = (f"__supervise__ returned {v!r}" if ok else
                   f"__supervise__ raised {one_line(v)}")
        self._die(f"unhandled failure of child mesh {failure.mesh_name!r} ({why})",
                  None, "", children=(failure,), kind="unhandled")
