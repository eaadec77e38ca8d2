"""Actor classes used by the tests (importable by the worker procs)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from monarch_cy.actor import (Actor, concurrent_endpoint, context, current_rank, current_size,
                              endpoint)


class Echo(Actor):
    def __init__(self, tag="echo"):
        self.tag = tag
        self.count = 0

    @endpoint
    def ping(self, x):
        return x

    @endpoint
    def incr(self, by=1):
        self.count += by
        return self.count

    @endpoint
    def whoami(self):
        """Its own rank in its mesh, whoever called it (and how they sliced it)."""
        r = context().actor_instance.rank
        return (self.tag, r.rank, dict(r), dict(r.extent), os.getpid(),
                os.environ.get("CUDA_VISIBLE_DEVICES"), "torch" in sys.modules)

    @endpoint
    def message_rank(self):
        """Monarch's current_rank()/current_size(): where it sits in the caller's slice."""
        r = current_rank()
        return r.rank, dict(r), current_size()

    @endpoint
    def boom(self, msg="boom"):
        raise ValueError(msg)

    @endpoint
    def nbytes(self, arr):
        return int(arr.nbytes)

    @endpoint
    def checksum(self, arr):
        return float(arr.sum())

    @endpoint
    def make_array(self, n, fill=1):
        import numpy as np
        return np.full(n, fill, dtype=np.uint8)

    @endpoint
    def say(self, text, stream="stdout"):
        print(text, file=sys.stdout if stream == "stdout" else sys.stderr)
        return True

    @endpoint
    def log(self, text):
        logging.getLogger("test.actor").warning(text)
        return True

    @endpoint
    def exit_now(self, code=3):
        os._exit(code)

    @endpoint
    def sleep(self, s):
        import time
        time.sleep(s)
        return s

    @endpoint
    def has_module(self, name):
        return name in sys.modules

    @endpoint(explicit_response_port=True)
    def countdown(self, port, n):
        for i in range(n, 0, -1):
            port.send(i)

    @endpoint
    def send_to(self, port, value):
        port.send(value)
        return True

    @endpoint
    def call_other(self, mesh, x):
        return mesh.ping.call(x).get().values()

    @endpoint
    def hold(self, mesh):
        self.other = mesh
        return len(mesh)

    @endpoint
    def call_held(self, x):
        return self.other.incr.call_one(x).get(5)

    @endpoint
    def make_lock(self):
        import threading
        return threading.Lock()

    @endpoint
    def call_self(self, mesh):
        return mesh.ping.call_one(1).get(5)

    def plain(self):
        return "not an endpoint"


class AsyncEcho(Actor):
    def __init__(self):
        self.log = []

    @endpoint
    async def ping(self, x):
        return x

    @endpoint
    async def slow(self, tag, delay):
        await asyncio.sleep(delay)
        self.log.append(tag)
        return tag

    @endpoint
    async def call_other(self, mesh, x):
        vm = await mesh.ping.call(x)
        return vm.values()

    @endpoint
    async def order(self):
        return list(self.log)

    @endpoint
    async def get_inside_loop(self, mesh):
        return mesh.ping.call_one(1).get()


class AsyncEchoConcurrent(AsyncEcho):
    @concurrent_endpoint
    async def slow(self, tag, delay):
        await asyncio.sleep(delay)
        self.log.append(tag)
        return tag


class AsyncEchoInterleaved(AsyncEcho, interleave=True):
    pass


class Recorder(Actor):
    def __init__(self):
        self.seen = []

    @endpoint
    def record(self, x):
        self.seen.append(x)

    @endpoint
    def seen_list(self):
        return list(self.seen)


class BadInit(Actor):
    def __init__(self):
        raise RuntimeError("init failed on purpose")

    @endpoint
    def ping(self, x):
        return x


class ExitInInit(Actor):
    def __init__(self):
        os._exit(7)

    @endpoint
    def ping(self, x):
        return x


class TorchActor(Actor):
    @endpoint
    def double(self, t):
        return t * 2

    @endpoint
    def tsum(self, t):
        return float(t.sum())


class Clash(Actor):
    """Takes a name the runtime keeps for its own messages."""

    @endpoint
    def __ready__(self):
        return 1


class Clock(Actor):
    @endpoint
    def now(self, x=None):
        import time
        return time.perf_counter()


# -- supervision ------------------------------------------------------------------

def _note(path, text):
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


class Victim(Actor):
    """Pid, sleeping, dying in several ways; counts its __init__ runs in a file."""

    def __init__(self, log=None):
        self.log = log
        _note(log, f"init {current_rank().rank} {os.getpid()}")

    @endpoint
    def ping(self, x=None):
        return x

    @endpoint
    def pid(self):
        return os.getpid()

    @endpoint
    def env(self, name):
        return os.environ.get(name)

    @endpoint
    def sleep(self, s):
        import time
        time.sleep(s)
        return s

    @endpoint
    def die(self, how="exit"):
        import signal
        if how == "exit":
            os._exit(5)
        if how == "segv":
            import ctypes
            ctypes.string_at(0)
        os.kill(os.getpid(), getattr(signal, how))

    @endpoint
    def wedge(self):
        """Hold the GIL forever (a deadlock inside C code): the proc stops answering."""
        import ctypes
        ctypes.PyDLL(None).sleep(3600)

    @endpoint
    def boom(self, msg="boom"):
        raise ValueError(msg)

    @endpoint
    def unpicklable(self):
        raise Unpicklable("cannot travel")

    @endpoint
    def sys_exit(self):
        raise SystemExit(3)

    def __cleanup__(self, exc):
        _note(self.log, f"cleanup {current_rank().rank} {type(exc).__name__}")


class Unpicklable(Exception):
    def __init__(self, text):
        super().__init__(text)
        self.lock = __import__("threading").Lock()


class Parent(Actor):
    """Owns a child mesh on its own proc; ``mode`` decides how it supervises."""

    def __init__(self, mode="handle", log=None):
        from monarch_cy.actor import this_proc
        self.mode, self.log = mode, log
        self.child = this_proc().spawn(f"child{current_rank().rank}", Victim, log)

    @endpoint
    def fail_child(self):
        self.child.boom.broadcast("child broke")
        return True

    @endpoint
    def ping(self, x=None):
        return x

    def __supervise__(self, failure):
        _note(self.log, f"supervise {failure.mesh_name} {failure.ranks} {failure.cause}")
        if self.mode == "raise":
            raise RuntimeError("supervisor gave up")
        if self.mode == "hang":
            import time
            time.sleep(3600)
        return self.mode == "handle"


class Gate(Actor):
    """``wait`` answers only once ``open`` is called: a call that stays pending."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()

    @concurrent_endpoint        # waits for another message of its own actor (open)
    async def wait(self) -> str:
        await self.opened.wait()
        return "opened"

    @endpoint
    async def open(self) -> None:
        self.opened.set()


class Poller(Actor):
    """Polls a Gate with ``asyncio.wait_for`` timeouts until stopped, as Monarch's
    grpo_actor.py Scorer does; ``stop`` must get through while ``run`` loops."""

    def __init__(self, gate) -> None:
        self.gate = gate
        self.running = False

    @concurrent_endpoint        # loops until another message (stop) gets through
    async def run(self, timeout: float) -> int:
        self.running, timeouts = True, 0
        while self.running:
            try:
                await asyncio.wait_for(self.gate.wait.call_one(), timeout)
            except asyncio.TimeoutError:
                timeouts += 1
        return timeouts

    @endpoint
    async def stop(self) -> None:
        self.running = False


class Busy(Actor):
    """Keeps the GIL from the proc's other threads (its heartbeat answerer) while it
    computes: alive and making progress, but silent."""

    @endpoint
    def spin(self, seconds):
        import time
        old = sys.getswitchinterval()
        sys.setswitchinterval(1000.0)     # no other thread runs until we block
        try:
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                n += 1
        finally:
            sys.setswitchinterval(old)
        return n > 0

    @endpoint
    def nbytes(self, arr):
        return int(arr.nbytes)


class GpuProbe(Actor):
    """What the GPU runtime shows this proc."""

    @endpoint
    def devices(self):
        from monarch_cy.gpu import Device, device_count
        n = device_count()
        return n, [Device(i).properties.pci_bus_id for i in range(n)]


class Noter(Actor):
    """Keeps every value it was sent, in the order it handled them."""

    def __init__(self, path=None):
        self.seen = []
        self.path = path

    @endpoint
    def note(self, x):
        self.seen.append(x)
        return x

    @endpoint
    def nap(self, x, seconds):
        import time
        time.sleep(seconds)
        self.seen.append(x)
        return x

    @endpoint
    def log(self):
        return list(self.seen)

    @endpoint
    def pid(self):
        return os.getpid()

    @endpoint
    def relays(self):
        """How many cast-tree relays this proc holds now."""
        from monarch_cy._transport.node import current_node
        return current_node().relay_count()

    @endpoint(explicit_response_port=True)
    def answer(self, port, x):
        port.send(x * 2)

    @endpoint
    def whoami(self):
        """``(rank, gpus coordinate, pid, len(path))``: where this actor was spawned."""
        r = current_rank()
        return r.rank, r["gpus"], os.getpid(), len(self.path) if self.path is not None else None

    @endpoint
    def unpicklable_at(self, rank, x):
        """``x``, except that the actor of ``rank`` answers a value that pickles but
        cannot be unpickled by the caller."""
        if current_rank().rank == rank:
            from _bad_results import FailsToUnpickle
            return FailsToUnpickle()
        return x

    @endpoint
    def fail_at(self, rank, x):
        """``x``, except that the actor of ``rank`` raises."""
        if current_rank().rank == rank:
            raise ValueError(f"rank {rank} was told to fail")
        return x

    def __cleanup__(self, exc):
        if self.path:
            with open(f"{self.path}.{current_rank().rank}", "w") as f:
                f.write(",".join(map(str, self.seen)))


class Hanger(Actor):
    """An async endpoint that waits on an event only its own coroutine references."""

    def __init__(self):
        self.events = []

    @concurrent_endpoint        # never ends: later messages must not queue behind it
    async def hang(self):
        import asyncio
        self.events.append("hang")
        try:
            await asyncio.Event().wait()
        finally:
            self.events.append("hang ended")

    @endpoint
    async def collect(self):
        import gc
        gc.collect()
        return list(self.events)


class PlainMethods(Actor):
    """Plain (non-endpoint) methods, called through ``as_endpoint``; ``stop``/``kill``
    of its own instance; what ``proc_mesh`` says; ``__cleanup__`` leaves a mark."""

    def __init__(self, mark_dir=None):
        self.mark_dir = mark_dir
        self.n = 0

    @endpoint
    def ping(self, x):
        return x

    def add(self, x, y=0):
        self.n += 1
        return x + y

    def via_port(self, port, x):
        port.send(x * 10)

    async def not_here(self):
        return 1

    @endpoint
    def stop_me(self, reason):
        from monarch_cy.actor import context
        context().actor_instance.stop(reason)
        return "stopping"

    @endpoint
    def kill_me(self, reason):
        from monarch_cy.actor import context
        context().actor_instance.kill(reason)
        return "killed"

    @endpoint
    def where(self):
        from monarch_cy.actor import context
        inst = context().actor_instance
        pm = inst.proc_mesh
        return (dict(pm.sizes), dict(inst.rank), len(pm))

    @endpoint
    def proc_mesh(self):
        from monarch_cy.actor import context
        return context().actor_instance.proc_mesh

    def __cleanup__(self, exc):
        if self.mark_dir:
            import os
            from monarch_cy.actor import context
            rank = context().actor_instance.rank.rank
            open(os.path.join(self.mark_dir, f"cleanup{rank}"), "w").close()


class AsyncPlain(Actor):
    @endpoint
    async def ping(self, x):
        return x

    async def double(self, x):
        return 2 * x

    def triple(self, x):
        return 3 * x


class Finalizable(Actor):
    """Leaves an atexit handler and a module global with a __del__ in its proc; each
    writes a file into ``out`` when the proc's interpreter ends."""

    def __init__(self, out: str) -> None:
        import atexit
        import types
        self.out = out
        pid = os.getpid()

        class Sentinel:
            def __init__(self, path, write):
                self.path, self.write = path, write

            def __del__(self):
                self.write(self.path)          # builtins may be gone by now

        def write(path):
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)

        mod = types.ModuleType(f"finalizable_{pid}")
        mod.sentinel = Sentinel(os.path.join(out, f"del.{pid}"), write)
        sys.modules[mod.__name__] = mod
        atexit.register(write, os.path.join(out, f"atexit.{pid}"))

    @endpoint
    def pid(self) -> int:
        return os.getpid()


class BusyHead(Actor):
    """An actor that keeps its proc's interpreter busy on request (the busy-head tests:
    tests/actor/cast/test_busy_head.py)."""

    @endpoint
    def pid(self):
        return os.getpid()

    @endpoint
    def ping(self, x):
        return x

    @endpoint
    def hold_gil(self, pid, seconds):
        """In the proc ``pid`` only: keep the GIL ``seconds`` in C (``usleep`` through
        ``ctypes.PyDLL``, which does not release the GIL around the call)."""
        if os.getpid() == pid:
            import ctypes
            ctypes.PyDLL(None).usleep(int(seconds * 1e6))
        return pid

    @endpoint
    def spin(self, pid, seconds, interval):
        """In the proc ``pid`` only: a pure-Python loop for ``seconds``, with the
        interpreter's switch interval set to ``interval`` meanwhile (a loop keeps the
        GIL that long at a time before another thread may take it)."""
        if os.getpid() == pid:
            import time
            old = sys.getswitchinterval()
            sys.setswitchinterval(interval)
            try:
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    pass
            finally:
                sys.setswitchinterval(old)
        return pid


class Writer(Actor):
    """Writes below Python's streams: fds 1 and 2, C code, child processes
    (tests/actor/host/test_output_capture.py)."""

    @endpoint
    def fd_write(self, fd, text):
        os.write(fd, text.encode())
        return True

    @endpoint
    def c_write(self, text):
        import ctypes
        libc = ctypes.CDLL(None)
        data = (text + "\n").encode()
        libc.write(1, data, len(data))
        libc.printf(b"printf %s\n", (text + "-printf").encode())
        libc.fflush(None)
        return True

    @endpoint
    def child(self, text):
        import subprocess
        subprocess.run(["sh", "-c", f"echo {text}-out; echo {text}-err >&2"], check=True)
        return True

    @endpoint
    def interleave(self, n):
        for i in range(n):
            if i % 2:
                os.write(1, f"seq {i}\n".encode())
            else:
                print(f"seq {i}")
        return True

    @endpoint
    def say(self, text):
        print(text)
        return True

    @endpoint
    def log(self, level, text):
        lg = logging.getLogger("monarch_cy_test_user")
        if not lg.handlers:
            lg.addHandler(logging.StreamHandler())
        lg.log(level, text)
        return True

    @endpoint
    def last_words(self, text):
        import signal
        print(text)
        os.write(2, f"{text}-from-c\n".encode())
        sys.stdout.write("no newline at the end")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


class Marker(Actor):
    """Writes ``<out>/<tag>.cleanup`` in its ``__cleanup__``."""

    def __init__(self, out: str, tag: str) -> None:
        self.out, self.tag = out, tag

    @endpoint
    def ok(self) -> str:
        return self.tag

    def __cleanup__(self, exc) -> None:
        with open(os.path.join(self.out, f"{self.tag}.cleanup"), "w") as f:
            f.write(repr(exc))


class MarkerOwner(Marker):
    """A Marker that spawns child Markers in its own proc and on a given proc mesh."""

    def __init__(self, out: str, tag: str) -> None:
        super().__init__(out, tag)
        self.kids = []

    @endpoint
    def spawn_child(self, tag: str, procs=None, grandchild: bool = False):
        from monarch_cy.actor import this_proc
        where = procs if procs is not None else this_proc()
        cls = MarkerOwner if grandchild else Marker
        kid = where.spawn(tag, cls, self.out, tag)
        self.kids.append(kid)
        if grandchild:
            kid.spawn_child.call_one(tag + "_grand").get()
        return kid


class TreeChaos(Actor):
    """For the cast tree's chaos test: answers checkable values and leaves
    ``<out>/cleanup.<rank>.<pid>`` from ``__cleanup__`` (one file per rank and
    incarnation)."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.rank = current_rank().rank
        self.bcasts = []

    @endpoint
    def echo(self, x):
        """``(rank, x, last broadcast seen or None)``."""
        return self.rank, x, self.bcasts[-1] if self.bcasts else None

    @endpoint
    def value(self, x):
        """``x + rank``: a fold of the whole mesh sums to ``n * x + n * (n - 1) / 2``."""
        return x + self.rank

    @endpoint
    def mark(self, b):
        """A broadcast: remembered in the order received."""
        self.bcasts.append(b)

    @endpoint
    def seen(self):
        """``(rank, pid, every broadcast this incarnation received, in order)``."""
        return self.rank, os.getpid(), list(self.bcasts)

    @endpoint
    def relays(self):
        """How many cast-tree relays this proc holds now (one waits for a subtree)."""
        from monarch_cy._transport.node import current_node
        return current_node().relay_count()

    def __cleanup__(self, exc) -> None:
        path = os.path.join(self.out, f"cleanup.{self.rank}.{os.getpid()}")
        with open(path, "w") as f:
            f.write(repr(exc))
