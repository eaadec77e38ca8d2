"""An actor's failure, supervision and stop, inside its proc: the half of
:class:`~.actor_host.ActorHost` that runs when something ends.

* an endpoint raised (:meth:`ActorFailure._fail`): the caller gets an
  :class:`ActorError`, or the actor *fails* (see :mod:`.actor_host` for when), after
  a post-mortem debugger session if a breakpoint paused that call;
* the actor fails (:meth:`~ActorFailure._die`): ``__cleanup__(exc)`` (an async
  actor's tasks cancelled first, :mod:`.loop_lifecycle`), then its owner hears of it
  (an actor anywhere in the job through ``SUPERVISE_ACTOR`` to its process, whose
  answer releases the reply to the call that failed this actor; the client through
  ``SUPERVISE``), and every later call is answered with its ``SupervisionError``
  (:meth:`~ActorFailure._when_failed`), a client's call also bounced back as
  undeliverable (``UNDELIVERABLE``, Monarch's).  From then on this worker proc takes
  no new actors (:func:`spawn_refusal`, Monarch's);
* a child failed (:meth:`~ActorFailure.supervision_event`, ``__supervise__``): a
  truthy answer handles it, anything else fails this actor in turn, named as Monarch
  names it; one that arrives after this actor failed or stopped is dropped;
* the actor stops (``__stop__``, ``__stop_mesh__``, ``context().actor_instance.stop``,
  its owner's death: ``__orphan__``): the meshes it spawned stop first, then (an async
  actor's running tasks cancelled and ended) ``__cleanup__(None)``, then the instance
  and its endpoints' functions are dropped.

Everything here runs on the actor's own thread (``post``, ``abort`` and
``supervision_event`` from any).
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
from monarch_cy._actor.host.loop_lifecycle import LoopLifecycle
from monarch_cy._actor.host.supervise_call import (call_with_timeout, one_line,
                                                   supervise_timeout)
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.model.actor import _debugged, _message, post_to
from monarch_cy._actor.model.ports import OneCollector
from monarch_cy._transport import fanout, wire
from monarch_cy._transport.protocol import (SEEN, SUPERVISE, SUPERVISE_ACTOR,
                                            UNDELIVERABLE, pack)

__all__ = ["ActorFailure", "format_exc", "picklable", "spawn_refusal", "mesh_stop_text"]

HOSTS = _state.HOSTS  # actor address -> ActorHost, in this process
_log = logger("actor")
_failed_here = []       # the first actor failure of this worker proc, once one failed
#: Seconds a failed actor waits for its owner's process to queue its failure before
#: it answers the call that failed it anyway (that process is stuck or unreachable).
ACK_S = 5.0


def spawn_refusal():
    """The error every call on an actor spawned in this worker proc gets once an
    actor of the proc has failed (Monarch's: a proc with supervision events takes
    no new actors), else None."""
    if not _failed_here:
        return None
    return RuntimeError("error spawning actor mesh: Cannot spawn new actors on mesh "
                        f"with supervision events (actor {_failed_here[0]} failed on "
                        "this proc)")


def format_exc(exc) -> str:
    """``exc`` with its traceback, as Python prints it."""
    try:
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # noqa: BLE001 - a broken __str__: name the type at least
        return f"{type(exc).__qualname__}: <str() failed>\n"


def mesh_stop_text(reason: str) -> str:
    """Why a stopped actor mesh's actors refuse calls (Monarch's words), with the
    caller's reason when it gave one."""
    text = "ActorMeshController received explicit stop request"
    return text if reason in ("", "stopped by client") else f"{text} ({reason})"


def picklable(exc):
    """``exc`` if the transport can carry it (its pickler: classes of the
    controller's ``__main__`` travel by value), else None."""
    try:
        data, bufs = wire.dumps(exc)
        wire.loads(data, bufs)
        return exc
    except Exception:  # noqa: BLE001 - any failure means it cannot travel
        return None


class ActorFailure(LoopLifecycle):
    """Mixed into :class:`~.actor_host.ActorHost`, whose state it uses: ``node``,
    ``name``, ``rank``, ``addr``, ``owner``, ``who``, ``inst``, ``actor``,
    ``failed``, ``cleaned``, ``stopped``, ``children``."""

    def abort(self, reason) -> None:
        """``context().actor_instance.abort(reason)``: fail this actor now."""
        why = "(no reason provided)" if reason is None else reason     # Monarch's words
        self._die(f"actor explicitly aborted due to: {why}", None)

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
        if port_id and not explicit and isinstance(e, Exception):
            err = ActorError(picklable(e), tb, self.name, self.rank.rank, method)
            self.node.reply(raddr, port_id, rank, False, err, rkey)
            return
        # A broadcast (nowhere to reply), an explicit port (the endpoint's, not the
        # runtime's) or not an Exception: the actor fails.  The caller, if any, is
        # answered once the owner has been told (so it hears of it first).
        self._die(f"actor explicitly aborted due to: {tb}", e, then=(
            lambda: self.node.reply(raddr, port_id, rank, False, self.failed, rkey))
            if port_id else None)

    # -- failure and supervision ----------------------------------------------
    def post(self, method: str, payload=None) -> None:
        """Queue a built-in message for this actor (thread-safe)."""
        post_to(self.node, self.addr, method, payload)

    def _die(self, cause: str, exc, details: str = "", cleanup: bool = True,
             children=(), kind: str = "actor", then=None) -> None:
        """This actor fails: ``__cleanup__(exc)``, then its owner hears of it, then
        ``then()`` runs (an answer to the call that failed it).
        ``kind="unhandled"``: it failed because it did not handle its child's
        failure (``children[0]``); its callers then get the child's failure, named
        as the child, as Monarch's do."""
        if self.failed is not None:
            if then is not None:
                then()
            return
        failure = MeshFailure(failure_mesh_name(self.name, self.owner),
                              (self.rank.rank,), cause, kind, details,
                              children, (self.addr,), self.who)
        self.failed = failure.error() if kind in ("unhandled", "raised") else \
            SupervisionError(self.name, self.rank.rank, cause, who=self.who)
        if not self.node.is_controller and not _failed_here:
            _failed_here.append(self.who)
        if cleanup and self._loop is not None:
            self._fail_on_loop(exc, failure, then)   # its tasks cancelled first (async)
            return
        if cleanup:
            self._cleanup(exc)
        self._report(failure, then)

    def _owner_who(self) -> str:
        """How Monarch's failure texts name the actor that spawned this one (they
        chain them): as its spawn said, or as it runs in this proc; ``<root>`` for
        the client."""
        owner = self.owner
        if owner and len(owner) > 4 and owner[4]:
            return owner[4]
        up = HOSTS.get(owner[1]) if owner and owner[0] == "actor" else None
        return up.who if up is not None and up.who else "<root>"

    def _report(self, failure, then=None) -> None:
        """Tell this actor's owner of ``failure``, then run ``then()``: an actor (in
        this proc or any other of the job) through its ``__supervise__``
        (``SUPERVISE_ACTOR`` to its process; ``then`` waits until that process has
        queued it for the owner, so whoever ``then`` answers hears of the failure
        after the owner did), or the client (``SUPERVISE``).  An owner that is gone
        hears nothing: its own failure reaches *its* owner."""
        owner = self.owner or ("client", getattr(self.node, "controller_addr", None)
                               or self.node.addr)
        try:
            if owner[0] == "actor":
                self._report_to_actor(owner, failure, then)
                return
            self.node.send(owner[1], [pack((SUPERVISE,), pickle.dumps(failure))])
        except Exception as e:  # noqa: BLE001 - never let reporting kill the thread
            _log.error("actor %s: cannot report its failure (%s):\n%s",
                       self.inst.actor_id, e, failure.report())
        if then is not None:
            then()

    def _report_to_actor(self, owner, failure, then) -> None:
        node = self.node
        where = owner[5] if len(owner) > 5 else None
        if where is None:                       # a spawn that did not say where
            post_to(node, owner[1], "__supervise__", failure)
            if then is not None:
                then()
            return
        port = 0
        if then is not None:
            # answered by the owner's process once queued, or failed when that
            # process dies; ACK_S bounds the wait either way
            ack = Future._make(None)
            port = node.register_port(OneCollector(ack, where, "__supervise__", None))
            ack._then(lambda _: then())
            node.add_timer(ACK_S, lambda: (node.drop_port(port), ack._set_exception(
                TimeoutError("the owner's process did not answer"))))
        node.send(where, [pack((SUPERVISE_ACTOR, owner[1], node.addr, port, node.key),
                               pickle.dumps(failure))])

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
            self._drop_instance()
            self.stopped.set()
            if port_id:
                self.node.reply(raddr, port_id, rank, True, None, rkey)
            return
        if method == "__supervise__":       # a failed owner: pass it up, chained
            self._take_control(self.node.decode(data, extras)[0], None)
            return
        if method == "__orphan__":          # a stopped one: its owner died since
            if isinstance(self.failed, MeshStoppedError):
                self.failed = self._orphan_error(data, extras)
            return
        if not isinstance(self.failed, SupervisionError):
            # never ran (its proc's setup raised, or the proc refuses new actors):
            # each call gets that error, as a plain error of the call (no bounce,
            # nothing seen)
            if port_id:
                self.node.reply(raddr, port_id, rank, False, self.failed, rkey)
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

    def _orphan_error(self, data, extras) -> SupervisionError:
        text, owner_who = self.node.decode(data, extras)[0][0]
        return SupervisionError(self.name, self.rank.rank, text, who=owner_who)

    def _drop_instance(self) -> None:
        """The actor stopped: drop its instance (its ``__del__`` runs now, not at
        process exit) and its endpoints' functions.  Nothing of the user's modules
        stays reachable from this actor's (daemon) thread, so the interpreter's
        finalization at the proc's exit clears those modules and their globals'
        ``__del__`` run, as in Monarch (a module whose globals dict is still
        referenced keeps them)."""
        self.actor = None
        self.endpoints = {}

    def _pass_up(self, failure) -> None:
        """A child's ``failure`` reached this actor after it had failed or stopped:
        dropped, as Monarch's (its own failure already went to its owner; a stopped
        actor supervises nothing)."""
        _log.info("actor %s: a child's failure came after it had %s; dropped:\n%s",
                  self.inst.actor_id,
                  "stopped" if isinstance(self.failed, MeshStoppedError) else "failed",
                  failure.report())

    def _builtin(self, method, data, extras, raddr, port_id, rank, rkey, loop=None):
        if method == "__ready__":
            if port_id:
                self.node.reply(raddr, port_id, rank, True, True, rkey)
        elif method in ("__stop__", "__stop_mesh__"):
            what = "stopped by client" if method == "__stop__" else \
                mesh_stop_text(self.node.decode(data, extras)[0][0])
            self.failed = MeshStoppedError(self.name, self.rank.rank, what, who=self.who)
            self._stop_children()

            def reply():
                if port_id:
                    self.node.reply(raddr, port_id, rank, True, None, rkey)
            if loop is not None:
                # Its running tasks (their callers get MeshStoppedError) are
                # cancelled and have ended before __cleanup__ (loop_lifecycle).
                self._stop_on_loop(reply)
                return
            self._cleanup(None)
            self._drop_instance()
            self.stopped.set()
            reply()
        elif method == "__supervise__":
            self._take_control(self.node.decode(data, extras)[0], loop)
        elif method == "__orphan__":
            # its owner died with its process: stop (nobody to tell), calls refused
            # with the owner's loss (child_failures)
            self.failed = self._orphan_error(data, extras)
            self._stop_children()
            if loop is not None:
                self._stop_on_loop(lambda: None)
                return
            self._cleanup(None)
            self._drop_instance()
            self.stopped.set()

    def supervision_event(self, failure) -> None:
        """A child's ``failure``, for this actor's ``__supervise__`` (thread-safe;
        the pump calls it).  An async actor's loop takes it at once (a task of its
        own, :mod:`.loop_lifecycle`); a sync actor takes it before its next queued
        message (Monarch's "control first"), woken by an empty ``__supervise__``."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._supervise_later, failure)
                return
            except RuntimeError:        # the loop is closed: the actor has ended
                pass
        self._control.append(failure)
        self.post("__supervise__")

    def _take_control(self, failures, loop) -> None:
        """Supervise ``failures`` (a ``__supervise__`` message's) and those queued by
        :meth:`supervision_event`, in order; passed up once this actor has failed."""
        todo = list(failures)
        while self._control:
            todo.append(self._control.popleft())
        for failure in todo:
            if self.failed is not None:
                self._pass_up(failure)
            elif loop is not None:
                self._supervise_later(failure)     # on the loop, not in turn
            else:
                self._supervise(failure)

    def _covered(self, failure) -> bool:
        """Whether ``failure`` is the death of a proc on which this actor's own child
        meshes run: those children's failures reach it each on its own
        (:mod:`.child_failures`), named as Monarch names them."""
        if failure.kind != "proc":
            return False
        return any(k in getattr(m, "_procs", ()) for m in self.children
                   for k in failure.addrs)

    def _supervise(self, failure) -> None:
        """A sync actor: ``__supervise__`` on a helper thread with the actor's
        context, bounded by ``supervise_timeout()``."""
        if self._covered(failure):
            return
        fn = getattr(type(self.actor), "__supervise__", None)
        self._verdict(failure, None if fn is None else call_with_timeout(
            lambda: fn(self.actor, failure), supervise_timeout(), self.inst))

    def _verdict(self, failure, outcome) -> None:
        """Act on ``__supervise__``'s ``outcome`` for ``failure``: None (there is
        none), ``(True, value)`` or ``(False, exception)``.  A truthy value handles
        it; anything else fails this actor, named as Monarch names it."""
        if outcome is None:
            why = "it has no __supervise__"
        else:
            ok, v = outcome
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
