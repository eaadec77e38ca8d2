"""Real-verbs checks, run inside the soft-RoCE guest (see tests/_soft_roce_guest.py and tests/_rdma_guest.py).

``python guest_checks.py RESULTS.json --device-a rxe0 --device-b rxe0`` runs
every check and writes ``{name: {"ok": bool, "detail": str}}``.  Two processes:
this one drives (side B, "client"); a child started with ``--serve FD`` owns
the target memory (side A, "owner").  They talk over a socketpair with the
records of :mod:`monarch_cy._verbs` (``QPEndpoint``/``RemoteRegion`` bytes):
the same exchange the actor transport will carry.

Each check that makes a queue pair fail gets a fresh pair of queue pairs (an RC
queue pair is unusable after an error completion).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import mmap
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from _soft_roce_guest import write_results  # noqa: E402
from monarch_cy import _rdma  # noqa: E402
from monarch_cy._verbs import (  # noqa: E402
    Context, ProtectionDomain, QPEndpoint, QueuePair, RemoteRegion, VerbsError, VerbsTimeout,
)

OWNER_BYTES = 16 << 20          # the owner's region (16 MiB)


# ------------------------------------------------------------------ framing

def send_msg(sock: socket.socket, kind: str, payload: bytes = b"") -> None:
    k = kind.encode()
    sock.sendall(struct.pack("!HI", len(k), len(payload)) + k + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("peer closed the control channel")
        buf += chunk
    return bytes(buf)


def recv_msg(sock: socket.socket) -> tuple[str, bytes]:
    klen, plen = struct.unpack("!HI", _recv_exact(sock, 6))
    return _recv_exact(sock, klen).decode(), _recv_exact(sock, plen)


def pattern(seed: int, n: int) -> bytes:
    """``n`` bytes, different for each seed (fast: a repeated 4 KiB block of a hash chain)."""
    block = b"".join(hashlib.sha256(f"{seed}:{i}".encode()).digest() for i in range(128))
    return (block * (n // len(block) + 1))[:n]


# ------------------------------------------------------------------ side A: the owner

def serve(fd: int, device: str) -> None:
    sock = socket.socket(fileno=fd)
    ctx = Context(device)
    pd = ProtectionDomain(ctx)
    buf = mmap.mmap(-1, OWNER_BYTES)
    mr = pd.register(buf)
    qps = []
    try:
        while True:
            kind, payload = recv_msg(sock)
            if kind == "connect":
                qp = QueuePair(pd)
                qp.connect(QPEndpoint.from_bytes(payload))
                qps.append(qp)
                send_msg(sock, "endpoint", qp.endpoint.to_bytes())
            elif kind == "region":
                send_msg(sock, "region", mr.remote().to_bytes())
            elif kind == "fill":
                seed, = struct.unpack("!I", payload)
                buf[:] = pattern(seed, OWNER_BYTES)
                send_msg(sock, "ok")
            elif kind == "read":
                off, n = struct.unpack("!QQ", payload)
                send_msg(sock, "data", bytes(buf[off:off + n]))
            elif kind == "quit":
                break
    finally:
        ctx.close()
        send_msg(sock, "closed", struct.pack("!?", mr.closed and all(q.closed for q in qps)))
        buf.close()


# ------------------------------------------------------------------ side B: the checks

class Client:
    def __init__(self, sock: socket.socket, device: str) -> None:
        self.sock = sock
        self.ctx = Context(device)
        self.pd = ProtectionDomain(self.ctx)
        self.buf = mmap.mmap(-1, OWNER_BYTES)
        self.mr = self.pd.register(self.buf)

    def ask(self, kind: str, payload: bytes = b"") -> bytes:
        send_msg(self.sock, kind, payload)
        _, reply = recv_msg(self.sock)
        return reply

    def new_qp(self) -> QueuePair:
        qp = QueuePair(self.pd)
        peer = QPEndpoint.from_bytes(self.ask("connect", qp.endpoint.to_bytes()))
        qp.connect(peer)
        return qp

    def remote(self) -> RemoteRegion:
        return RemoteRegion.from_bytes(self.ask("region"))


def check_devices(c: Client, out: dict) -> str:
    names = _rdma.device_names()
    detail = f"_rdma.device_names() = {names}; context {c.ctx!r}; port {c.ctx.port_attr}; " \
             f"gid {c.ctx.gid.hex()} (index {c.ctx.gid_index})"
    assert c.ctx.name in names
    assert c.ctx.port_attr["active"] and c.ctx.port_attr["link_layer"] == "ethernet"
    # Cross-check against rdma-core's own bindings where this Python can import them.
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import pyverbs.device as pvd
    except Exception as e:  # noqa: BLE001
        return detail + f"; pyverbs not importable here ({e})"
    pv = sorted(d.name.decode() for d in pvd.get_device_list())
    assert pv == sorted(names), (pv, names)
    with pvd.Context(name=c.ctx.name) as pctx:
        pgid = pctx.query_gid(port_num=c.ctx.port, index=c.ctx.gid_index)
        pport = pctx.query_port(c.ctx.port)
    assert str(pgid).replace(":", "") == c.ctx.gid.hex(), (str(pgid), c.ctx.gid.hex())
    assert pport.max_msg_sz == c.ctx.port_attr["max_msg_sz"]
    return detail + f"; pyverbs agrees: devices {pv}, gid {pgid}, max_msg_sz {pport.max_msg_sz}"


def check_write(c: Client, out: dict) -> str:
    c.ask("fill", struct.pack("!I", 1))
    remote = c.remote()
    qp = c.new_qp()
    data = pattern(2, 1 << 20)
    c.buf[: len(data)] = data
    # 64 requests of 16 KiB into the owner's second MiB, one batch.
    ops = [(c.mr.addr + i * 16384, c.mr.lkey, remote.addr + (1 << 20) + i * 16384, remote.rkey, 16384)
           for i in range(64)]
    t = time.monotonic()
    qp.write(ops, timeout=60)
    dt = time.monotonic() - t
    got = c.ask("read", struct.pack("!QQ", 0, 3 << 20))
    assert got[1 << 20: 2 << 20] == data, "written range differs"
    assert got[: 1 << 20] == pattern(1, OWNER_BYTES)[: 1 << 20], "bytes before the range changed"
    assert got[2 << 20:] == pattern(1, OWNER_BYTES)[2 << 20: 3 << 20], "bytes after the range changed"
    qp.close()
    return f"1 MiB in 64 RDMA WRITEs verified by the owner ({dt:.3f} s); neighbours untouched"


def check_read(c: Client, out: dict) -> str:
    c.ask("fill", struct.pack("!I", 3))
    remote = c.remote()
    qp = c.new_qp()
    c.buf[:] = bytes(OWNER_BYTES)
    t = time.monotonic()
    qp.read([(c.mr.addr, c.mr.lkey, remote.addr, remote.rkey, OWNER_BYTES)], timeout=120)
    dt = time.monotonic() - t
    assert c.buf[:] == pattern(3, OWNER_BYTES), "read bytes differ from the owner's"
    qp.close()
    return f"16 MiB RDMA READ verified ({dt:.3f} s, {OWNER_BYTES / dt / 1e6:.1f} MB/s, functional figure)"


def check_batch_reuse(c: Client, out: dict) -> str:
    c.ask("fill", struct.pack("!I", 4))
    remote = c.remote()
    qp = c.new_qp()
    # 300 requests > the 128-deep send queue: windowed; the batch is posted twice.
    ops = [(c.mr.addr + i * 4096, c.mr.lkey, remote.addr + i * 4096, remote.rkey, 4096) for i in range(300)]
    batch = qp.batch(_rdma.OP_READ, ops)
    for _ in range(2):
        c.buf[: 300 * 4096] = bytes(300 * 4096)
        qp.submit(batch, timeout=60)
        assert c.buf[: 300 * 4096] == pattern(4, OWNER_BYTES)[: 300 * 4096]
    qp.close()
    return f"{len(batch)}-request READ batch ({batch.nbytes} bytes) posted twice, up to {qp.max_send_wr} in flight"


def _expect_verbs_error(fn, names: set[str]) -> VerbsError:
    try:
        fn()
    except VerbsError as e:
        assert e.name in names, f"got {e.name} ({e}), expected one of {sorted(names)}"
        back = pickle.loads(pickle.dumps(e))
        assert (type(back), back.name, back.status, back.wr_id) == (type(e), e.name, e.status, e.wr_id)
        return e
    raise AssertionError(f"no VerbsError (expected {sorted(names)})")


def check_bad_rkey(c: Client, out: dict) -> str:
    remote = c.remote()
    qp = c.new_qp()
    bad = (remote.rkey ^ 0x5A5A00) or 1
    e = _expect_verbs_error(
        lambda: qp.write([(c.mr.addr, c.mr.lkey, remote.addr, bad, 4096)], timeout=30),
        {"IBV_WC_REM_ACCESS_ERR"})
    qp.close()
    return f"write with rkey {bad:#x} -> {type(e).__name__}: {e}"


def check_remote_out_of_range(c: Client, out: dict) -> str:
    remote = c.remote()
    qp = c.new_qp()
    e = _expect_verbs_error(
        lambda: qp.read([(c.mr.addr, c.mr.lkey, remote.addr + remote.length - 8, remote.rkey, 64)],
                        timeout=30),
        {"IBV_WC_REM_ACCESS_ERR"})
    qp.close()
    return f"read of 64 bytes from 8 before the remote region's end -> {e}"


def check_local_unregistered(c: Client, out: dict) -> str:
    remote = c.remote()
    qp = c.new_qp()
    stray = mmap.mmap(-1, 4096)
    stray_addr = ctypes.addressof(ctypes.c_char.from_buffer(stray))
    try:
        qp.read([(stray_addr, c.mr.lkey, remote.addr, remote.rkey, 4096)])
    except ValueError as e:
        checked = f"owning tier refused before posting: {e}"
    else:
        raise AssertionError("unregistered local memory was accepted")
    assert qp.connected and not qp.closed
    # Past the check (regions=None), the device itself must refuse it.
    batch = _rdma.WorkBatch(_rdma.OP_READ, [(stray_addr, c.mr.lkey, remote.addr, remote.rkey, 4096)])
    e = _expect_verbs_error(lambda: qp.submit(batch, timeout=30),
                            {"IBV_WC_LOC_PROT_ERR", "IBV_WC_LOC_ACCESS_ERR", "IBV_WC_LOC_LEN_ERR"})
    qp.close()
    stray.close()
    return checked + f"; unchecked, the device answered {e}"


def check_timeout(c: Client, out: dict) -> str:
    """An idle wait times out on time, and releases the GIL while it waits."""
    qp = c.new_qp()
    ticks = [0]
    stop = threading.Event()

    def spin() -> None:                 # needs the GIL for every tick
        while not stop.is_set():
            ticks[0] += 1

    # Baseline: how far the thread gets in 0.3 s while this thread sleeps (GIL free).
    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.3)
    base = ticks[0]
    t = time.monotonic()
    try:
        _rdma.wait(qp._cq, 1, 0.3)
    except VerbsTimeout as e:
        dt = time.monotonic() - t
        during = ticks[0] - base
        stop.set()
        th.join()
        assert 0.25 <= dt < 5, dt
        assert isinstance(e, TimeoutError)
        # Holding the GIL for 0.3 s would leave the thread at most one switch interval.
        assert during > base // 4, f"thread advanced {during} during wait vs {base} during sleep"
        msg = f"{e} after {dt:.2f} s; another thread ran {during} ticks meanwhile ({base} while sleeping)"
    else:
        stop.set()
        th.join()
        raise AssertionError("wait on an idle CQ returned")
    qp.close()
    return msg


def check_close(c: Client, out: dict) -> str:
    ctx = Context(c.ctx.name)
    pd = ProtectionDomain(ctx)
    buf = bytearray(8192)
    mr = pd.register(buf)
    qp = QueuePair(pd)
    try:
        buf.append(0)
    except BufferError:
        pinned = True
    else:
        pinned = False
    assert pinned, "a registered bytearray could be resized"
    ctx.close()
    ctx.close()
    assert qp.closed and mr.closed and pd.closed and ctx.closed
    buf.append(0)  # unpinned again
    mr.close()
    return "closing the context closed qp, mr, pd (double close is a no-op) and unpinned the buffer"


def check_device_registration(c: Client, out: dict) -> str:
    """The GPU-memory path's decisions, driven with host memory (no GPU in the guest)."""
    notes = []
    buf = mmap.mmap(-1, 1 << 16)
    ptr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    r, w = os.pipe()
    closed_fds = []

    def not_a_dmabuf(p, n):             # an fd the kernel cannot import as a dma-buf
        fd = os.dup(r)
        closed_fds.append(fd)
        return fd

    mr = c.pd.register_device(ptr, 1 << 16, get_dmabuf_fd=not_a_dmabuf, keepalive=buf)
    assert mr.kind == "device" and mr.addr == ptr and mr.length == 1 << 16
    for fd in closed_fds:               # register_device closed the exporter's fd
        try:
            os.fstat(fd)
        except OSError:
            pass
        else:
            raise AssertionError(f"fd {fd} from get_dmabuf_fd was left open")
    notes.append(f"bad dma-buf fd -> fell back to ibv_reg_mr on the pointer ({mr!r})")
    mr.close()
    try:
        _rdma.reg_dmabuf_mr(c.pd.handle, 0, 4096, 0, r)
    except VerbsError as e:
        notes.append(f"reg_dmabuf_mr(pipe fd) -> {e.name}")
    else:
        raise AssertionError("a pipe registered as a dma-buf")
    os.close(r)
    os.close(w)

    def exporter_fails(p, n):
        raise RuntimeError("memGetDmaBufFd: not supported")

    unmapped = 0x10000                  # below mmap_min_addr: never mapped
    try:
        c.pd.register_device(unmapped, 4096, get_dmabuf_fd=exporter_fails)
    except VerbsError as e:
        assert e.name == "GPU_MEMORY_NOT_REGISTRABLE", e
        assert "memGetDmaBufFd: not supported" in e.message and "peer memory" in e.message, e
        notes.append(f"neither path -> {e}")
    else:
        raise AssertionError("unmapped memory registered")
    buf.close()
    return "; ".join(notes)


CHECKS = [check_devices, check_write, check_read, check_batch_reuse, check_bad_rkey,
          check_remote_out_of_range, check_local_unregistered, check_timeout,
          check_device_registration, check_close]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?")
    ap.add_argument("--device-a", default="rxe0")
    ap.add_argument("--device-b", default="rxe0")
    ap.add_argument("--serve", type=int)
    ap.add_argument("--netns-a", default="")
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve, args.device_a)
        return 0
    results: dict[str, dict] = {}
    mine, theirs = socket.socketpair()
    cmd = [sys.executable, __file__, "--serve", str(theirs.fileno()), "--device-a", args.device_a]
    if args.netns_a:
        cmd = ["ip", "netns", "exec", args.netns_a, *cmd]
    owner = subprocess.Popen(cmd, pass_fds=[theirs.fileno()])
    theirs.close()
    mine.settimeout(120)
    try:
        client = Client(mine, args.device_b)
        for check in CHECKS:
            name = check.__name__.removeprefix("check_")
            t = time.monotonic()
            try:
                detail = check(client, results)
                results[name] = {"ok": True, "detail": detail}
            except Exception:  # noqa: BLE001 - every failure is reported, the rest still run
                results[name] = {"ok": False, "detail": traceback.format_exc()}
            results[name]["seconds"] = round(time.monotonic() - t, 3)
            print(f"[guest] {name}: {'ok' if results[name]['ok'] else 'FAILED'} "
                  f"({results[name]['seconds']} s) {results[name]['detail'][:300]}", flush=True)
        send_msg(mine, "quit")
        _, closed = recv_msg(mine)
        results["owner_close"] = {"ok": struct.unpack("!?", closed)[0],
                                  "detail": "owner closed its context: region and queue pairs closed"}
    except Exception:  # noqa: BLE001
        results["harness"] = {"ok": False, "detail": traceback.format_exc()}
    finally:
        try:
            owner.wait(timeout=30)
        except subprocess.TimeoutExpired:
            owner.kill()
            owner.wait()
        results["owner_exit"] = {"ok": owner.returncode == 0, "detail": f"exit status {owner.returncode}"}
    return write_results(results, args.results)


if __name__ == "__main__":
    sys.exit(main())
