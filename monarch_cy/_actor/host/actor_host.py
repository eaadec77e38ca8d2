"""Hosting actors in a process: the SPAWN handler and each actor's thread.

Every actor owns a thread and a PULL socket (a CURVE server bound at the address the
spawner chose).  The thread first unpickles the class and arguments and runs
``__init__``, then reads its socket directly: no hop between receiving a message
and running the endpoint.  Messages from one sender arrive over one zmq pipe, so
they are handled in the order sent.

* sync actors (only ``def`` endpoints): one message at a time, in order;
* async actors (``async def`` endpoints): an asyncio loop on the actor thread reads
  the socket and, as in Monarch, still handles one message at a time in arrival
  order: a plain async endpoint is awaited to its end before the next message (a
  queue holds what arrives meanwhile); a ``@concurrent_endpoint`` (or every endpoint
  of an ``Actor`` subclass declared with ``interleave=True``) starts as a task when
  its turn comes and the next message is taken at once.

An exception (an ``Exception``) in an endpoint whose caller waits for its result is
answered with :class:`ActorError` (exception when picklable, else its type name and
text, plus the formatted traceback) and the actor keeps serving.  The actor *fails*
instead, as in Monarch (see :mod:`monarch_cy._actor.base.client_faults`), when
``__init__`` raises, an endpoint with nowhere to send the error raises (``broadcast``,
``send``, an explicit-response-port endpoint: the port is the endpoint's, not the
runtime's), an endpoint raises a ``BaseException`` that is not an ``Exception``, or it
leaves a child mesh's failure unhandled: it runs ``__cleanup__(exc)``, reports a
:class:`MeshFailure` to its owner, and answers every call, the failing one included,
with :class:`SupervisionError`.

Built-in messages (names no endpoint may take): ``__supervise__`` (a child's
failure, for this actor's ``__supervise__``), ``__ready__`` (answered once
``__init__`` finished), ``__stop__`` (run ``__cleanup__(None)``; the proc is
stopping).
"""

from __future__ import annotations

import pickle
import threading
from collections import deque

from monarch_cy import _config
from monarch_cy._errors import ActorError, MeshStoppedError
from monarch_cy._log import logger
from monarch_cy._telemetry.propagation import TRACE_KW
from monarch_cy._telemetry.runtime import instruments as _telemetry
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.failure import actor_who
from monarch_cy._actor.base.shape import Extent, Point
from monarch_cy._actor.host import proc_setup, traced_endpoints
from monarch_cy._actor.host.actor_failure import (ActorFailure, format_exc, picklable,
                                                  spawn_refusal)
from monarch_cy._actor.host.init_guard import InitGuard
from monarch_cy._actor.host.supervise_call import one_line
from monarch_cy._actor.model.actor import (BUILTIN, ROOT_CREATOR, ActorInstance,
                                           _message, debugged_call_over,
                                           endpoint_table)
from monarch_cy._actor.model.endpoint import EXPLICIT_PLAIN
from monarch_cy._actor.model.ports import Port
from monarch_cy._transport import unixsock
from monarch_cy._transport.cork import MAX_BURST
from monarch_cy._transport.protocol import unpack_call

__all__ = ["handle_spawn", "ActorHost"]

HOSTS = _state.HOSTS  # actor address -> ActorHost, in this process
# Unpickling a spawn's class and arguments imports their modules: one actor thread
# at a time, since importing one package (torch) from several threads at once fails
# ("partially initialized module", "already defined").  __init__ itself is not held.
_DECODE_LOCK = threading.Lock()


def handle_spawn(node, hdr, data, extras) -> None:
    """SPAWN: ``(SPAWN, name, addr, rank, labels, sizes, proc_rank, owner)``; payload
    ``(cls, args, kwargs)``, unpickled in the actor's thread (classes from the
    controller's ``__main__`` arrive by value: the controller's script never runs
    here).  ``owner``: ``("client", controller addr)`` or ``("actor", owner actor
    addr)``."""
    _, name, addr, rank, labels, sizes, proc_rank, owner = hdr[:8]
    host = ActorHost(node, name, addr, Point(rank, Extent(labels, sizes)), proc_rank,
                     (bytes(data), list(extras)), owner)
    HOSTS[addr] = host
    host.start()


_BUILTIN = BUILTIN


def _cancelled() -> bool:
    """Whether the running task has been asked to cancel (and not given it up)."""
    import asyncio  # deferred: import time (only async actors get here)
    task = asyncio.current_task()
    return task is not None and bool(getattr(task, "cancelling", lambda: 0)())


def _supervision(frames) -> bool:
    """Whether a message is a child's failure for ``__supervise__`` (an async actor
    takes it at once, not in turn: :mod:`.loop_lifecycle`)."""
    try:
        return unpack_call(frames[0])[0][0] == "__supervise__"
    except Exception:  # noqa: BLE001 - malformed: its turn reports it
        return False
_loads = pickle.loads
_msg_set = _message.set
_log = logger("actor")


class ActorHost(ActorFailure):
    """One actor instance, its socket and its thread."""

    def __init__(self, node, name, addr, rank, proc_rank, frames, owner=None):
        self.node = node
        self.owner = owner
        self.failed = None          # SupervisionError answered to every call once set
        self.cleaned = threading.Event()    # __cleanup__ ran (or there is none)
        self.children = []       # actor meshes it spawned: stopped before it stops
        self.stopped = threading.Event()    # stopped: instance dropped, tasks ended
        self._seen_sent = False
        self._bad_records = 0       # malformed messages dropped
        self.name = name
        self.who = f"{name}[{rank.rank}]"   # in errors; Monarch's form once the class is known
        self.addr = addr
        self.rank = rank
        self.inst = ActorInstance(name, rank, proc_rank, f"{name}[{rank.rank}]", addr, self)
        self._frames = frames
        self.actor = None
        self.init_error = None
        self.endpoints = {}
        self._tasks = set()         # running async endpoint calls (held: see _hold)
        self._busy = False          # an async endpoint holds the turn (see _in_turn)
        self._waiting = deque()     # messages that arrived meanwhile, in order
        self._control = deque()     # children's failures to supervise first
        self._held = ()             # messages a guard kept during __init__ (init_guard)
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"actor-{name}[{rank.rank}]")

    def start(self) -> None:
        self.thread.start()

    # -- the actor thread ----------------------------------------------------
    def _run(self) -> None:
        node = self.node
        _state.local.instance = self.inst
        try:
            sock = node.server_socket(None, self.addr)
        except Exception as e:  # address in use etc: every call will fail
            _log.error("actor %s: cannot bind %s: %s", self.inst.actor_id, self.addr, e)
            return
        self.sock = sock
        is_async = False
        refused = spawn_refusal()
        if refused is None and proc_setup._GATE is not None:  # bootstrap= runs first
            refused = proc_setup.hold_until_set_up(self.name, self.addr, self.owner)
        if refused is not None:
            # The setup raised, or an actor of this proc failed: every call gets that
            # error (as Monarch's); this actor never runs and nothing is reported to
            # supervision.
            self.failed = self.init_error = refused
            self._frames = None
            self.cleaned.set()
        else:
            is_async = self._construct(sock)
        self.inst.sync = not is_async
        tel = _telemetry()          # telemetry: asked once per actor, never per message
        if tel is not None and self.init_error is None:
            self._handle = traced_endpoints.instrument(self, tel)
        try:
            if is_async and self.init_error is None:
                self._run_async(sock)
            else:
                self._run_sync(sock)
        except node.closed_errors:
            pass
        finally:
            sock.close(linger=0)

    def _construct(self, sock) -> bool:
        """Unpickle the class and arguments and run ``__init__`` (a failure fails the
        actor); whether its endpoints are async.  Meanwhile a guard answers a stop
        (:mod:`.init_guard`); what it kept is handled first (``_held``)."""
        guard = InitGuard(self, sock)
        guard.arm()
        try:
            return self._init()
        finally:
            self._held = guard.disarm()
            if isinstance(self.failed, MeshStoppedError):    # stopped meanwhile
                if self.actor is not None:
                    self._cleanup(None)
                self._drop_instance()
                self.cleaned.set()

    def _init(self) -> bool:
        node = self.node
        is_async = False
        try:
            with _DECODE_LOCK:
                cls, args, kwargs = node.decode(*self._frames)
            self._frames = None
            self.who = actor_who(f"{cls.__module__}.{cls.__qualname__}", self.name,
                                 self.rank, self._owner_who())
            self.inst.class_name = f"{cls.__module__}.{cls.__qualname__}"
            owner = self.owner
            self.inst.creator = owner[6] if owner and len(owner) > 6 else ROOT_CREATOR
            eps, _ = endpoint_table(cls)
            interleave = getattr(cls, "_mcy_interleave", False) or _config.interleave()
            for ep_name, (explicit, asy) in eps.items():
                prop = getattr(cls, ep_name)
                self.endpoints[ep_name] = (prop._fn, explicit, asy,
                                           asy and (interleave or prop._concurrent))
                is_async = is_async or asy
            _msg_set((self.rank.rank, None))      # __init__'s message rank: its own
            self.actor = cls(*args, **kwargs)
        except BaseException as e:
            self.init_error = ActorError(picklable(e), format_exc(e), self.name,
                                         self.rank.rank, "__init__")
            self._die(f"__init__ raised {one_line(e)}", e, format_exc(e), cleanup=False)
        return is_async

    def _run_sync(self, sock) -> None:
        # A lone call is handled and answered at once; calls found already queued
        # behind it are handled as a corked burst (their replies leave together).
        node = self.node
        recv, handle, again = node.recv, self._handle, node.again_errors
        held, self._held = self._held, ()
        for frames in held:             # kept during __init__ (init_guard): first
            handle(frames)
        while True:
            handle(recv(sock))
            try:
                frames = recv(sock, 1)
            except again:
                continue
            node.cork()
            try:
                handle(frames)
                for _ in range(MAX_BURST - 1):
                    try:
                        frames = recv(sock, 1)
                    except again:
                        break
                    handle(frames)
            finally:
                node.uncork()

    def _run_async(self, sock) -> None:
        import asyncio  # deferred: import time (only async actors need asyncio)
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        handle = self._handle
        recv = self.node.recv
        again, closed = self.node.again_errors, self.node.closed_errors
        waiting = self._waiting

        def take(frames):
            if self._busy and not _supervision(frames):
                waiting.append(frames)          # one message at a time
                return
            body = handle(frames, loop)
            if body is not None:                # an endpoint to await first
                self._busy = True
                self._hold(loop.create_task(self._in_turn(body, loop)))

        def drain():          # to EAGAIN (ZMQ_FD is edge-triggered)
            try:
                while True:
                    take(recv(sock, 1))         # 1: NOBLOCK
            except again:
                pass
            except closed:
                loop.stop()

        held, self._held = self._held, ()
        for frames in held:                     # kept during __init__: first
            loop.call_soon(take, frames)
        fd = sock.fileno() if isinstance(sock, unixsock.Inbox) else sock.getsockopt(14)  # ZMQ_FD
        loop.add_reader(fd, drain)
        loop.call_soon(drain)
        loop.run_forever()

    def _hold(self, task) -> None:
        # The loop holds a waiting task only weakly: without this a collection could
        # destroy one whose awaitable only it references, mid-call.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _in_turn(self, body, loop) -> None:
        """An async actor's messages, one at a time: await ``body`` (the endpoint that
        took the turn), then handle what arrived meanwhile, in order, awaiting each
        endpoint in turn.  Once the actor has stopped or failed (this task may be
        cancelled by the stop), what is still waiting is answered from its state."""
        waiting = self._waiting
        try:
            await body
            while waiting:
                body = self._handle(waiting.popleft(), loop)
                if body is not None:
                    await body
        finally:
            self._busy = False
            if self.failed is not None:
                while waiting:
                    self._handle(waiting.popleft(), loop)

    def _handle(self, frames, loop=None):
        """Handle one message; for an async endpoint that must run to its end before
        the next message, return its coroutine (the caller awaits it), else None."""
        node = self.node
        if self._control:                   # a child's failure comes first
            self._take_control((), loop)
        try:
            (method, raddr, port_id, rank, rkey, ext), payload = unpack_call(frames[0])
        except Exception as e:  # noqa: BLE001 - a malformed record fails alone
            return self._malformed(frames, e)
        _msg_set((rank, ext))
        running_explicit = False     # the endpoint itself runs, holding the port
        try:
            if self.failed is not None:
                return self._when_failed(method, payload, frames[1:], raddr,
                                         port_id, rank, rkey)
            ent = self.endpoints.get(method)
            if ent is None:
                if method in _BUILTIN:
                    return self._builtin(method, payload, frames[1:], raddr, port_id,
                                         rank, rkey, loop)
                ent = self._plain(method)            # as_endpoint(mesh.method)
                if ent is None:
                    raise AttributeError(f"actor {self.inst.actor_id} has no endpoint "
                                         f"{method!r}")
            fn, explicit, asy, concurrent = ent
            args, kwargs = _loads(payload) if len(frames) == 1 else \
                node.decode(payload, frames[1:])
            if kwargs and TRACE_KW in kwargs:    # a traced caller's context: ours
                _msg_set((rank, ext, kwargs.pop(TRACE_KW)))
            if explicit:
                args = (Port(raddr, port_id, rank, rkey), *args)
            if asy:
                body = self._run_task(fn, args, kwargs, raddr, port_id, rank, rkey,
                                      explicit, method)
                if not concurrent:
                    return body
                self._hold(loop.create_task(body))
                return None
            running_explicit = explicit
            result = fn(self.actor, *args, **kwargs)
        except BaseException as e:
            self._fail(e, raddr, port_id, rank, rkey, method, running_explicit)
            return None
        debugged_call_over()
        if port_id and not explicit:
            node.reply(raddr, port_id, rank, True, result, rkey, self._unsendable, method)
        return None

    def _plain(self, method):
        """The entry of a plain method called through ``as_endpoint`` (``method``:
        its name, or :data:`EXPLICIT_PLAIN` + it for an explicit response port); None
        when the class has no such method.  ``TypeError`` for an ``async def`` one on
        an actor with no event loop (its endpoints are all ``def``), as Monarch."""
        explicit = method.startswith(EXPLICIT_PLAIN)
        name = method[len(EXPLICIT_PLAIN):] if explicit else method
        fn = None if name.startswith("_") else getattr(type(self.actor), name, None)
        if not callable(fn) or name in self.endpoints:
            return None
        asy = bool(getattr(getattr(fn, "__code__", None), "co_flags", 0) & 0x80)
        if asy and self.inst.sync:
            raise TypeError(f"{self.inst.actor_id}.{name} is an async def method, but its "
                            "actor's endpoints are all def, so it has no event loop to "
                            "run on")
        ent = self.endpoints[method] = (fn, explicit, asy, False)
        return ent

    async def _run_task(self, fn, args, kwargs, raddr, port_id, rank, rkey, explicit,
                        method):
        try:
            result = await fn(self.actor, *args, **kwargs)
        except BaseException as e:
            if self.failed is not None:     # cancelled by the actor's stop or failure
                if port_id:
                    self.node.reply(raddr, port_id, rank, False, self.failed, rkey)
                return
            self._fail(e, raddr, port_id, rank, rkey, method, explicit)
            return
        if self.failed is not None and _cancelled():
            # the stop or failure cancelled it and the body swallowed that (asyncio's
            # wait_for can): its caller gets the actor's state, as if it had ended
            if port_id:
                self.node.reply(raddr, port_id, rank, False, self.failed, rkey)
            return
        debugged_call_over()
        if port_id and not explicit:
            self.node.reply(raddr, port_id, rank, True, result, rkey, self._unsendable,
                            method)

    def _unsendable(self, e, method):
        """How a result of ``method`` that could not be encoded (``e``) is answered:
        an ActorError naming the endpoint, this rank and the cause (the actor goes
        on)."""
        cause = f"{type(e).__name__}: {e}"
        exc = TypeError(f"the result of endpoint {method} on rank {self.rank.rank} of "
                        f"{self.name} cannot be sent: {cause}")
        return ActorError(exc, f"{exc}\n", self.name, self.rank.rank, method)

    def _malformed(self, frames, exc) -> None:
        """A record whose header cannot be parsed (from an authenticated peer: a bug
        or a version skew, never an outsider's).  No one can be answered; it is
        dropped and logged (the first few, then one in 1000), and the actor serves
        the next message."""
        self._bad_records += 1
        n = self._bad_records
        if n <= 3 or n % 1000 == 0:
            head = bytes(memoryview(frames[0])[:16]) if frames else b""
            _log.error("actor %s: dropped malformed message #%d (%d frame(s), header "
                       "starts %r): %s", self.inst.actor_id, n, len(frames), head,
                       one_line(exc))
