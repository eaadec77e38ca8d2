"""Hosting actors in a process: the SPAWN handler and each actor's thread.

Every actor owns a thread and a PULL socket (a CURVE server bound at the address the
spawner chose).  The thread first unpickles the class and arguments and runs
``__init__``, then reads its socket directly: no hop between receiving a message
and running the endpoint.  Messages from one sender arrive over one zmq pipe, so
they are handled in the order sent.

* sync actors (only ``def`` endpoints): one message at a time, in order;
* async actors (any ``async def``): an asyncio loop on the actor thread reads the
  socket; each message starts a task in arrival order; ``def`` endpoints of such an
  actor run inline on the loop.

An exception in an endpoint is answered with :class:`ActorError` (exception when
picklable + formatted traceback) and the actor keeps serving.  If ``__init__``
fails, every call is answered with that error.
"""

from __future__ import annotations

import pickle
import sys
import threading
import traceback

from monarch_cy._actor.actor import ActorInstance, _set_current, endpoint_table
from monarch_cy._actor.errors import ActorError
from monarch_cy._actor.ports import Port
from monarch_cy._actor.shape import Extent, Point

__all__ = ["handle_spawn", "ActorHost", "HOSTS"]

HOSTS = {}          # actor address -> ActorHost, in this process
_main_loaded = False


def _load_main(path: str) -> None:
    """Make the controller's ``__main__`` classes importable (as multiprocessing does)."""
    global _main_loaded
    if _main_loaded or not path:
        return
    _main_loaded = True
    import importlib.util
    main = sys.modules.get("__main__")
    if main is not None and getattr(main, "__file__", None) == path:
        return
    spec = importlib.util.spec_from_file_location("__mp_main__", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["__mp_main__"] = mod
    spec.loader.exec_module(mod)
    sys.modules["__main__"] = mod


def handle_spawn(node, hdr, data, extras) -> None:
    """SPAWN: ``(SPAWN, name, addr, rank, labels, sizes, proc_rank, main_path)``;
    payload ``(cls, args, kwargs)``, unpickled in the actor's thread."""
    _, name, addr, rank, labels, sizes, proc_rank, main_path = hdr
    host = ActorHost(node, name, addr, Point(rank, Extent(labels, sizes)), proc_rank,
                     (bytes(data), list(extras)), main_path)
    HOSTS[addr] = host
    host.start()


def _format(exc) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _picklable(exc):
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return None


class ActorHost:
    """One actor instance, its socket and its thread."""

    def __init__(self, node, name, addr, rank, proc_rank, frames, main_path):
        self.node = node
        self.name = name
        self.addr = addr
        self.rank = rank
        self.inst = ActorInstance(name, rank, proc_rank, f"{name}[{rank.rank}]", addr)
        self._frames = frames
        self._main_path = main_path
        self.actor = None
        self.init_error = None
        self.endpoints = {}
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"actor-{name}[{rank.rank}]")

    def start(self) -> None:
        self.thread.start()

    # -- the actor thread ----------------------------------------------------
    def _run(self) -> None:
        import zmq
        node = self.node
        _set_current(self.inst)
        try:
            sock = node.server_socket(zmq.PULL, self.addr)
        except Exception as e:  # address in use etc: every call will fail
            print(f"actor {self.inst.actor_id}: cannot bind {self.addr}: {e}",
                  file=sys.stderr)
            return
        self.sock = sock
        is_async = False
        try:
            if self._main_path:
                _load_main(self._main_path)
            cls, args, kwargs = node.decode(*self._frames)
            self._frames = None
            eps, _ = endpoint_table(cls)
            for ep_name, (explicit, asy) in eps.items():
                fn = getattr(cls, ep_name)._fn
                self.endpoints[ep_name] = (fn, explicit, asy)
                is_async = is_async or asy
            self.actor = cls(*args, **kwargs)
        except BaseException as e:
            self.init_error = ActorError(_picklable(e), _format(e), self.name,
                                         self.rank.rank, "__init__")
        self.inst.sync = not is_async
        try:
            if is_async and self.init_error is None:
                self._run_async(sock)
            else:
                self._run_sync(sock)
        except zmq.ContextTerminated:
            pass
        finally:
            sock.close(linger=0)

    def _run_sync(self, sock) -> None:
        recv = self.node.recv
        handle = self._handle
        while True:
            handle(recv(sock))

    def _run_async(self, sock) -> None:
        import asyncio
        import zmq
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        handle = self._handle
        recv = self.node.recv

        def drain():
            try:
                while sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                    handle(recv(sock, zmq.NOBLOCK), loop)
            except zmq.Again:
                pass
            except zmq.ContextTerminated:
                loop.stop()

        loop.add_reader(sock.getsockopt(zmq.FD), drain)
        loop.call_soon(drain)
        loop.run_forever()

    def _handle(self, frames, loop=None) -> None:
        node = self.node
        f0 = frames[0]
        n = f0[0] | (f0[1] << 8)
        mv = memoryview(f0)
        method, raddr, port_id, rank, rkey = pickle.loads(mv[2:2 + n])
        try:
            if self.init_error is not None:
                raise self.init_error
            ent = self.endpoints.get(method)
            if ent is None:
                raise AttributeError(f"actor {self.inst.actor_id} has no endpoint "
                                     f"{method!r}")
            fn, explicit, asy = ent
            args, kwargs = node.decode(mv[2 + n:], frames[1:])
            if explicit:
                args = (Port(raddr, port_id, rank, rkey), *args)
            if asy:
                loop.create_task(self._run_task(fn, args, kwargs, raddr, port_id, rank,
                                                rkey, explicit, method))
                return
            result = fn(self.actor, *args, **kwargs)
        except BaseException as e:
            self._fail(e, raddr, port_id, rank, rkey, method)
            return
        if port_id and not explicit:
            node.reply(raddr, port_id, rank, True, result, rkey)

    async def _run_task(self, fn, args, kwargs, raddr, port_id, rank, rkey, explicit,
                        method):
        try:
            result = await fn(self.actor, *args, **kwargs)
        except BaseException as e:
            self._fail(e, raddr, port_id, rank, rkey, method)
            return
        if port_id and not explicit:
            self.node.reply(raddr, port_id, rank, True, result, rkey)

    def _fail(self, e, raddr, port_id, rank, rkey, method) -> None:
        if isinstance(e, ActorError) and e is self.init_error:
            err = e
        else:
            err = ActorError(_picklable(e), _format(e), self.name, self.rank.rank, method)
        if port_id:
            self.node.reply(raddr, port_id, rank, False, err, rkey)
        else:
            print(f"endpoint {self.inst.actor_id}.{method} (broadcast) raised:\n"
                  f"{err.remote_traceback}", file=sys.stderr)
