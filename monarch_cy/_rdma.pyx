# cython: language_level=3
"""Flat Cython tier over libibverbs: registration, RC queue pairs, RDMA READ/WRITE.

Why libibverbs is bound at run time (and pyverbs owns nothing here):

* The extension must build where ``libibverbs-dev`` is absent and import where
  ``libibverbs.so.1`` is absent, so nothing links against it.  The first call
  that needs it (:func:`load`, or any function below) ``dlopen``s it and binds
  one typed function pointer per symbol (``monarch_cy/include/mcy_verbs.h``
  declares the ABI slice, mcy_-prefixed; a test proves it against the real
  ``verbs.h``).  ``import monarch_cy`` and ``import monarch_cy._rdma`` never load it.
  There is no search to share with the Python loaders (:mod:`monarch_cy._loader`):
  the one place is ``libibverbs.so.1`` through the dynamic loader's path (or the
  ``path`` given to :func:`load`).  As in the GPU shim, ctypes opens the library and
  finds the symbols, never calls them: their addresses fill this module's C table
  (no ``dl*`` call in C keeps the extension off glibc 2.34's symbols, so the wheel's
  manylinux tag stays old).
* ``ibv_post_send`` and ``ibv_poll_cq`` are inline in ``verbs.h``: they call
  the provider through ``ctx->ops``.  The header replicates that call path, so
  the hot path touches no libibverbs symbol and no Python object.
* pyverbs (Debian's ``python3-pyverbs``) imports in this project's venv only
  through a path entry and where the CPython minor version matches, exists on
  no PyPI wheel for rdma-core < 59, and keeps its C pointers in ``cdef``
  attributes that only code compiled against its ``.pxd`` files (not shipped)
  can reach.  A data path that must own the ``ibv_qp*`` it posts to cannot be
  built on it, so this tier owns the resources itself; pyverbs serves the
  tests as an independent cross-check.

Rules, stated once for every function here:

* Flat: this tier imports nothing of monarch_cy but the flat :mod:`monarch_cy._errors`
  (``monarch_cy._verbs`` re-exports the verbs errors from there).
* Handles (context, PD, MR, CQ, QP) are plain ``int`` pointers.  This tier owns
  nothing: whoever creates a handle destroys it, children before parents (the
  owning tier, :mod:`monarch_cy._verbs`, does that).  Passing a destroyed or
  foreign handle is undefined behaviour; 0 is refused with ``ValueError``.
* Every libibverbs call releases the GIL.  :func:`wait` polls completions with
  the GIL released and sleeps between empty polls (it never spins a core for
  long); it always has a deadline.
* A failing call raises :class:`~monarch_cy._verbs.VerbsError` named by errno
  (``call`` says which verb); an error completion raises ``VerbsError`` named
  by its ``ibv_wc_status`` (``IBV_WC_REM_ACCESS_ERR``) with libibverbs' text.
  No library, no kernel support or no such device raise ``VerbsUnavailable``
  saying which.  Bad arguments raise ``TypeError``/``ValueError`` naming the
  parameter and value, before any verbs call.
* GPU memory: :func:`reg_dmabuf_mr` registers a dma-buf (what
  ``cuMemGetHandleForAddressRange``/``hipMemGetHandleForAddressRange`` export);
  :func:`reg_mr` on a device pointer is the peer-memory path.  Choosing between
  them is the owning tier's job (:func:`monarch_cy._verbs.register_device_memory`).
"""

from libc.errno cimport errno, ENOSYS
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset
from posix.time cimport nanosleep, timespec, clock_gettime, CLOCK_MONOTONIC

import ctypes as _ctypes
import errno as _errno_mod
import os as _os

from monarch_cy._errors import VerbsError, VerbsTimeout, VerbsUnavailable  # flat: nothing above

ACCESS_LOCAL_WRITE = MCY_IBV_ACCESS_LOCAL_WRITE
ACCESS_REMOTE_WRITE = MCY_IBV_ACCESS_REMOTE_WRITE
ACCESS_REMOTE_READ = MCY_IBV_ACCESS_REMOTE_READ
ACCESS_RDMA = MCY_IBV_ACCESS_LOCAL_WRITE | MCY_IBV_ACCESS_REMOTE_WRITE | MCY_IBV_ACCESS_REMOTE_READ
OP_WRITE = MCY_IBV_WR_RDMA_WRITE
OP_READ = MCY_IBV_WR_RDMA_READ
MTU = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
MAX_WR_LENGTH = 1 << 31        # one work request moves at most 2 GiB (ibv_sge.length)
MAX_WAIT = 1 << 24             # completions one wait() call may collect

WC_STATUS_NAMES = (
    "IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
    "IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
    "IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR",
    "IBV_WC_REM_OP_ERR", "IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR",
    "IBV_WC_LOC_RDD_VIOL_ERR", "IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR",
    "IBV_WC_INV_EECN_ERR", "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
    "IBV_WC_RESP_TIMEOUT_ERR", "IBV_WC_GENERAL_ERR", "IBV_WC_TM_ERR", "IBV_WC_TM_RNDV_INCOMPLETE",
)

cdef int _loaded = 0
cdef object _load_error = None
cdef object _library = None        # the ctypes handle: kept so the library stays open


# ---------------------------------------------------------------- loading and errors

def load(path=None):
    """Bind libibverbs (``libibverbs.so.1``, or ``path``); idempotent.

    Raises ``VerbsUnavailable`` naming the library and dlopen's reason.  A
    failure is remembered: later calls raise the same error without retrying.
    The library is never closed: providers it loads keep threads and atexit hooks.
    """
    global _loaded, _load_error, _library
    cdef char err[512]
    cdef void** addresses
    if _loaded:
        return
    if _load_error is not None:
        raise _load_error
    name = "libibverbs.so.1" if path is None else _os.fsdecode(path)
    try:
        # ctypes opens the library and finds the symbols (dlopen RTLD_NOW | RTLD_LOCAL);
        # the C table is filled from the addresses and every call goes through it.
        lib = _ctypes.CDLL(name, mode=_os.RTLD_LOCAL)
    except OSError as e:
        reason = f"cannot load {name}: {e}"
    else:
        addresses = <void**>calloc(MCY_VERBS_NFUNCS, sizeof(void*))
        if addresses == NULL:
            raise MemoryError()
        try:
            for i in range(MCY_VERBS_NFUNCS):
                try:
                    fn = getattr(lib, mcy_verbs_names[i].decode('ascii'))
                except AttributeError:
                    continue
                addresses[i] = <void*><uintptr_t>_ctypes.cast(fn, _ctypes.c_void_p).value
            rc = mcy_verbs_bind(addresses, name.encode(), err, sizeof(err))
        finally:
            free(addresses)
        if rc == 0:
            _library = lib
            _loaded = 1
            return
        reason = err.decode("utf-8", "replace")
    _load_error = VerbsUnavailable(
        "RDMA verbs are unavailable: " + reason
        + " (install rdma-core's libibverbs1 and a provider, e.g. ibverbs-providers)",
        call="dlopen")
    raise _load_error


def is_loaded():
    """Whether libibverbs has been bound in this process."""
    return bool(_loaded)


def has_dmabuf():
    """Whether the bound libibverbs has ``ibv_reg_dmabuf_mr`` (rdma-core >= 34)."""
    _need()
    return mcy_vt.fn.reg_dmabuf_mr != NULL


cdef inline int _need() except -1:
    if not _loaded:
        load()
    return 0


cdef int _errno_fail(int err, str call) except -1:
    name = _errno_mod.errorcode.get(err, f"errno {err}")
    raise VerbsError(err, name, _os.strerror(err) if err else "failed without errno", call)


def wc_status_name(int status):
    """``IBV_WC_...`` for a completion status value (``IBV_WC_<n>`` if unknown)."""
    if 0 <= status < len(WC_STATUS_NAMES):
        return WC_STATUS_NAMES[status]
    return f"IBV_WC_{status}"


def completion_error(int status, uint64_t wr_id, uint32_t vendor_err=0):
    """The :class:`VerbsError` for an error completion (libibverbs' text included)."""
    cdef const char* text = NULL
    _need()
    text = mcy_vt.fn.wc_status_str(status)
    msg = text.decode("utf-8", "replace") if text != NULL else "unknown status"
    if vendor_err:
        msg += f" (vendor error {vendor_err:#x})"
    return VerbsError(status, wc_status_name(status), msg, "completion", wr_id)


cdef uintptr_t _handle(object h, str param) except 0:
    if isinstance(h, bool) or not isinstance(h, int):
        raise TypeError(f"{param} must be an int handle, got {h!r}")
    if h <= 0 or h >= (1 << 64):
        raise ValueError(f"{param} must be a live handle (a non-zero pointer), got {h!r}")
    return <uintptr_t>h


cdef uint64_t _u64(object v, str param, uint64_t lo, uint64_t hi) except? 0:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{param} must be an int, got {v!r}")
    if v < lo or v > hi:
        raise ValueError(f"{param} must be in {lo}..{hi}, got {v!r}")
    return <uint64_t>v


# ---------------------------------------------------------------- devices

def device_names():
    """Names of the verbs devices (``["rxe0"]``); ``[]`` where the kernel lists none.

    Raises ``VerbsUnavailable`` where the kernel has no RDMA subsystem at all.
    """
    cdef int n = 0, i, err = 0
    cdef mcy_ibv_device** lst
    _need()
    with nogil:
        lst = mcy_vt.fn.get_device_list(&n)
        if lst == NULL:
            err = errno
    if lst == NULL:
        if err == ENOSYS:
            raise VerbsUnavailable(
                "no RDMA devices: ibv_get_device_list failed with ENOSYS: this kernel has no "
                "RDMA (InfiniBand/RoCE) subsystem, or /sys/class/infiniband_verbs is absent",
                err, "ENOSYS", "ibv_get_device_list")
        _errno_fail(err, "ibv_get_device_list")
    try:
        return [lst[i].name.decode("utf-8", "replace") for i in range(n)]
    finally:
        mcy_vt.fn.free_device_list(lst)


def open_device(str name):
    """Open the device called ``name``; returns a context handle (close with :func:`close_device`)."""
    cdef int n = 0, i, err = 0
    cdef mcy_ibv_device** lst
    cdef mcy_ibv_context* ctx = NULL
    names = device_names()
    if name not in names:
        raise VerbsUnavailable(
            f"no RDMA device named {name!r}; devices here: {names or 'none'}",
            call="ibv_open_device")
    bname = name.encode()
    with nogil:
        lst = mcy_vt.fn.get_device_list(&n)
        if lst == NULL:
            err = errno
    if lst == NULL:
        _errno_fail(err, "ibv_get_device_list")
    try:
        for i in range(n):
            if lst[i].name == bname:
                with nogil:
                    ctx = mcy_vt.fn.open_device(lst[i])
                    if ctx == NULL:
                        err = errno
                break
    finally:
        mcy_vt.fn.free_device_list(lst)
    if ctx == NULL:
        _errno_fail(err, "ibv_open_device")
    return <uintptr_t>ctx


def close_device(ctx):
    cdef mcy_ibv_context* c = <mcy_ibv_context*>_handle(ctx, "ctx")
    cdef int rc, err = 0
    _need()
    with nogil:
        rc = mcy_vt.fn.close_device(c)
        if rc:
            err = errno
    if rc:
        _errno_fail(err, "ibv_close_device")


def query_device(ctx):
    """The device limits the upper tiers use, as a dict."""
    cdef mcy_ibv_context* c = <mcy_ibv_context*>_handle(ctx, "ctx")
    cdef mcy_ibv_device_attr a
    cdef int rc
    _need()
    memset(&a, 0, sizeof(a))
    with nogil:
        rc = mcy_vt.fn.query_device(c, &a)
    if rc:
        _errno_fail(rc, "ibv_query_device")
    return {
        "fw_ver": a.fw_ver[:64].split(b"\0", 1)[0].decode("utf-8", "replace"),
        "max_mr_size": a.max_mr_size, "max_qp_wr": a.max_qp_wr, "max_sge": a.max_sge,
        "max_cqe": a.max_cqe, "max_qp_rd_atom": a.max_qp_rd_atom,
        "max_qp_init_rd_atom": a.max_qp_init_rd_atom, "phys_port_cnt": a.phys_port_cnt,
        "vendor_id": a.vendor_id, "vendor_part_id": a.vendor_part_id,
    }


def query_port(ctx, int port=1):
    """Port ``port``'s state: ``{"state", "lid", "active_mtu", "max_msg_sz", "gid_tbl_len", "link_layer"}``.

    ``active_mtu`` is in bytes; ``link_layer`` is ``"ethernet"`` (RoCE) or ``"infiniband"``.
    """
    cdef mcy_ibv_context* c = <mcy_ibv_context*>_handle(ctx, "ctx")
    cdef mcy_ibv_port_attr a
    cdef int rc
    if not 1 <= port <= 255:
        raise ValueError(f"port must be in 1..255, got {port!r}")
    _need()
    memset(&a, 0, sizeof(a))   # the exported symbol fills only the older, shorter prefix
    with nogil:
        rc = mcy_vt.fn.query_port(c, <uint8_t>port, &a)
    if rc:
        _errno_fail(rc, "ibv_query_port")
    return {
        "state": a.state, "active": a.state == MCY_IBV_PORT_ACTIVE, "lid": a.lid,
        "active_mtu": 128 << a.active_mtu if a.active_mtu else 0,
        "max_msg_sz": a.max_msg_sz, "gid_tbl_len": a.gid_tbl_len,
        "link_layer": {MCY_IBV_LINK_LAYER_ETHERNET: "ethernet",
                       MCY_IBV_LINK_LAYER_INFINIBAND: "infiniband"}.get(a.link_layer, "infiniband"),
    }


def query_gid(ctx, int port, int index):
    """The 16-byte GID at ``index`` of ``port``'s table."""
    cdef mcy_ibv_context* c = <mcy_ibv_context*>_handle(ctx, "ctx")
    cdef mcy_ibv_gid g
    cdef int rc, err = 0
    if not 1 <= port <= 255:
        raise ValueError(f"port must be in 1..255, got {port!r}")
    if index < 0:
        raise ValueError(f"index must be >= 0, got {index!r}")
    _need()
    with nogil:
        rc = mcy_vt.fn.query_gid(c, <uint8_t>port, index, &g)
        if rc:
            err = errno
    if rc:
        _errno_fail(err or (rc if rc > 0 else 22), "ibv_query_gid")
    return bytes(g.raw[:16])



# ---------------------------------------------------------------- protection domains, memory

def alloc_pd(ctx):
    """A protection domain of ``ctx`` (free with :func:`dealloc_pd` after its MRs and QPs)."""
    cdef mcy_ibv_context* c = <mcy_ibv_context*>_handle(ctx, "ctx")
    cdef mcy_ibv_pd* pd
    cdef int err = 0
    _need()
    with nogil:
        pd = mcy_vt.fn.alloc_pd(c)
        if pd == NULL:
            err = errno
    if pd == NULL:
        _errno_fail(err, "ibv_alloc_pd")
    return <uintptr_t>pd


def dealloc_pd(pd):
    cdef mcy_ibv_pd* p = <mcy_ibv_pd*>_handle(pd, "pd")
    cdef int rc
    _need()
    with nogil:
        rc = mcy_vt.fn.dealloc_pd(p)
    if rc:
        _errno_fail(rc, "ibv_dealloc_pd")


cdef tuple _mr_result(mcy_ibv_mr* mr):
    return (<uintptr_t>mr, mr.lkey, mr.rkey)


def reg_mr(pd, addr, length, int access=ACCESS_RDMA):
    """Register ``length`` bytes at ``addr`` (host memory, or a device pointer where the
    kernel has peer-memory support); returns ``(mr, lkey, rkey)``.

    The memory must stay allocated until :func:`dereg_mr`; the caller guarantees
    that.  Blocks while the kernel pins the pages (GIL released).
    """
    cdef mcy_ibv_pd* p
    cdef uint64_t a = _u64(addr, "addr", 1, (1 << 64) - 1)
    cdef uint64_t n = _u64(length, "length", 1, (1 << 63) - 1)
    cdef mcy_ibv_mr* mr
    cdef int err = 0
    if a + n < a:
        raise ValueError(f"addr + length overflows 64 bits: addr={addr:#x}, length={length}")
    p = <mcy_ibv_pd*>_handle(pd, "pd")
    _need()
    with nogil:
        mr = mcy_vt.fn.reg_mr(p, <void*><uintptr_t>a, <size_t>n, access)
        if mr == NULL:
            err = errno
    if mr == NULL:
        _errno_fail(err, "ibv_reg_mr")
    return _mr_result(mr)


def reg_dmabuf_mr(pd, offset, length, iova, int fd, int access=ACCESS_RDMA):
    """Register ``length`` bytes at ``offset`` of the dma-buf ``fd`` (GPU memory exported by
    the GPU runtime), addressed by peers as ``iova``; returns ``(mr, lkey, rkey)``.

    The kernel takes its own reference on the dma-buf: the caller may close ``fd``
    once this returns.  Raises ``VerbsError`` (``EOPNOTSUPP``) where libibverbs
    predates dma-buf support (rdma-core < 34), else the kernel's errno.
    """
    cdef mcy_ibv_pd* p
    cdef uint64_t off = _u64(offset, "offset", 0, (1 << 63) - 1)
    cdef uint64_t n = _u64(length, "length", 1, (1 << 63) - 1)
    cdef uint64_t va = _u64(iova, "iova", 0, (1 << 64) - 1)
    cdef mcy_ibv_mr* mr
    cdef int err = 0
    if fd < 0:
        raise ValueError(f"fd must be an open dma-buf file descriptor (>= 0), got {fd!r}")
    p = <mcy_ibv_pd*>_handle(pd, "pd")
    _need()
    if mcy_vt.fn.reg_dmabuf_mr == NULL:
        raise VerbsError(_errno_mod.EOPNOTSUPP, "EOPNOTSUPP",
                         "this libibverbs has no ibv_reg_dmabuf_mr (rdma-core >= 34 needed)",
                         "ibv_reg_dmabuf_mr")
    with nogil:
        mr = mcy_vt.fn.reg_dmabuf_mr(p, off, <size_t>n, va, fd, access)
        if mr == NULL:
            err = errno
    if mr == NULL:
        _errno_fail(err, "ibv_reg_dmabuf_mr")
    return _mr_result(mr)


def dereg_mr(mr):
    """Deregister ``mr``; no work request may still use it."""
    cdef mcy_ibv_mr* m = <mcy_ibv_mr*>_handle(mr, "mr")
    cdef int rc
    _need()
    with nogil:
        rc = mcy_vt.fn.dereg_mr(m)
    if rc:
        _errno_fail(rc, "ibv_dereg_mr")


# ---------------------------------------------------------------- completion queues, queue pairs

def create_cq(ctx, int cqe):
    """A completion queue of at least ``cqe`` entries (no completion channel: polled only)."""
    cdef mcy_ibv_context* c = <mcy_ibv_context*>_handle(ctx, "ctx")
    cdef mcy_ibv_cq* cq
    cdef int err = 0
    if cqe < 1:
        raise ValueError(f"cqe must be >= 1, got {cqe!r}")
    _need()
    with nogil:
        cq = mcy_vt.fn.create_cq(c, cqe, NULL, NULL, 0)
        if cq == NULL:
            err = errno
    if cq == NULL:
        _errno_fail(err, "ibv_create_cq")
    return <uintptr_t>cq


def destroy_cq(cq):
    """Destroy ``cq``; its queue pairs must be destroyed first."""
    cdef mcy_ibv_cq* q = <mcy_ibv_cq*>_handle(cq, "cq")
    cdef int rc
    _need()
    with nogil:
        rc = mcy_vt.fn.destroy_cq(q)
    if rc:
        _errno_fail(rc, "ibv_destroy_cq")


def create_rc_qp(pd, cq, int max_send_wr, int max_send_sge=1):
    """A reliable-connected queue pair sending and receiving through ``cq``.

    Returns ``(qp, qp_num)``.  Work requests are signaled one by one (the batch
    says which), not all (``sq_sig_all=0``).  One receive slot only: this tier
    uses one-sided operations.
    """
    cdef mcy_ibv_pd* p = <mcy_ibv_pd*>_handle(pd, "pd")
    cdef mcy_ibv_cq* q = <mcy_ibv_cq*>_handle(cq, "cq")
    cdef mcy_ibv_qp_init_attr attr
    cdef mcy_ibv_qp* qp
    cdef int err = 0
    if max_send_wr < 1:
        raise ValueError(f"max_send_wr must be >= 1, got {max_send_wr!r}")
    if max_send_sge < 1:
        raise ValueError(f"max_send_sge must be >= 1, got {max_send_sge!r}")
    _need()
    memset(&attr, 0, sizeof(attr))
    attr.send_cq = q
    attr.recv_cq = q
    attr.cap.max_send_wr = max_send_wr
    attr.cap.max_recv_wr = 1
    attr.cap.max_send_sge = max_send_sge
    attr.cap.max_recv_sge = 1
    attr.qp_type = MCY_IBV_QPT_RC
    attr.sq_sig_all = 0
    with nogil:
        qp = mcy_vt.fn.create_qp(p, &attr)
        if qp == NULL:
            err = errno
    if qp == NULL:
        _errno_fail(err, "ibv_create_qp")
    return (<uintptr_t>qp, qp.qp_num)


def destroy_qp(qp):
    cdef mcy_ibv_qp* q = <mcy_ibv_qp*>_handle(qp, "qp")
    cdef int rc
    _need()
    with nogil:
        rc = mcy_vt.fn.destroy_qp(q)
    if rc:
        _errno_fail(rc, "ibv_destroy_qp")


cdef int _modify(mcy_ibv_qp* q, mcy_ibv_qp_attr* attr, int mask, str step) except -1:
    cdef int rc
    with nogil:
        rc = mcy_vt.fn.modify_qp(q, attr, mask)
    if rc:
        name = _errno_mod.errorcode.get(rc, f"errno {rc}")
        raise VerbsError(rc, name, f"{_os.strerror(rc)} (moving the queue pair to {step})",
                         "ibv_modify_qp")
    return 0


def connect_rc_qp(qp, *, int port, int gid_index, int mtu, unsigned int local_psn,
                  unsigned int remote_qp_num, int remote_lid, bytes remote_gid,
                  unsigned int remote_psn, int max_rd_atomic=1, int access=ACCESS_RDMA,
                  int timeout=14, int retry_cnt=7, int rnr_retry=7):
    """Move ``qp`` through INIT, RTR and RTS towards the peer's queue pair.

    The peer's ``(remote_qp_num, remote_lid, remote_gid, remote_psn)`` come from
    any channel (the actor transport; a pipe in tests).  ``mtu`` is in bytes (256
    .. 4096, at most both ports' active MTU); ``remote_gid`` is 16 bytes (all
    zero: address by LID, InfiniBand without GRH).  ``max_rd_atomic`` bounds the
    RDMA READs in flight each way (at most the device's ``max_qp_rd_atom``).
    ``access`` is what the peer may do to memory registered for this QP.
    """
    cdef mcy_ibv_qp* q = <mcy_ibv_qp*>_handle(qp, "qp")
    cdef mcy_ibv_qp_attr a
    if mtu not in MTU:
        raise ValueError(f"mtu must be one of {sorted(MTU)} (bytes), got {mtu!r}")
    if not 1 <= port <= 255:
        raise ValueError(f"port must be in 1..255, got {port!r}")
    if not 0 <= gid_index <= 255:
        raise ValueError(f"gid_index must be in 0..255, got {gid_index!r}")
    if len(remote_gid) != 16:
        raise ValueError(f"remote_gid must be 16 bytes, got {len(remote_gid)}")
    if not 0 <= remote_lid <= 0xFFFF:
        raise ValueError(f"remote_lid must be in 0..65535, got {remote_lid!r}")
    for pname, v in (("local_psn", local_psn), ("remote_psn", remote_psn),
                     ("remote_qp_num", remote_qp_num)):
        if v > 0xFFFFFF:
            raise ValueError(f"{pname} must fit in 24 bits, got {v!r}")
    if not 1 <= max_rd_atomic <= 255:
        raise ValueError(f"max_rd_atomic must be in 1..255, got {max_rd_atomic!r}")
    _need()

    memset(&a, 0, sizeof(a))
    a.qp_state = MCY_IBV_QPS_INIT
    a.pkey_index = 0
    a.port_num = port
    a.qp_access_flags = access
    _modify(q, &a, MCY_IBV_QP_STATE | MCY_IBV_QP_PKEY_INDEX | MCY_IBV_QP_PORT
            | MCY_IBV_QP_ACCESS_FLAGS, "INIT")

    memset(&a, 0, sizeof(a))
    a.qp_state = MCY_IBV_QPS_RTR
    a.path_mtu = MTU[mtu]
    a.dest_qp_num = remote_qp_num
    a.rq_psn = remote_psn
    a.max_dest_rd_atomic = max_rd_atomic
    a.min_rnr_timer = 12
    a.ah_attr.dlid = remote_lid
    a.ah_attr.sl = 0
    a.ah_attr.port_num = port
    if remote_gid != bytes(16):
        a.ah_attr.is_global = 1
        memcpy(a.ah_attr.grh.dgid.raw, <const char*>remote_gid, 16)
        a.ah_attr.grh.sgid_index = gid_index
        a.ah_attr.grh.hop_limit = 64
    _modify(q, &a, MCY_IBV_QP_STATE | MCY_IBV_QP_AV | MCY_IBV_QP_PATH_MTU | MCY_IBV_QP_DEST_QPN
            | MCY_IBV_QP_RQ_PSN | MCY_IBV_QP_MAX_DEST_RD_ATOMIC | MCY_IBV_QP_MIN_RNR_TIMER, "RTR")

    memset(&a, 0, sizeof(a))
    a.qp_state = MCY_IBV_QPS_RTS
    a.timeout = timeout
    a.retry_cnt = retry_cnt
    a.rnr_retry = rnr_retry
    a.sq_psn = local_psn
    a.max_rd_atomic = max_rd_atomic
    _modify(q, &a, MCY_IBV_QP_STATE | MCY_IBV_QP_TIMEOUT | MCY_IBV_QP_RETRY_CNT
            | MCY_IBV_QP_RNR_RETRY | MCY_IBV_QP_SQ_PSN | MCY_IBV_QP_MAX_QP_RD_ATOMIC, "RTS")


# ---------------------------------------------------------------- the data path

cdef class WorkBatch:
    """RDMA READs or WRITEs prepared once as a chain of work requests; postable many times.

    ``ops`` is a sequence of ``(local_addr, lkey, remote_addr, rkey, length)``;
    ``opcode`` is :data:`OP_READ` (remote -> local) or :data:`OP_WRITE`
    (local -> remote).  Work request ``i`` gets id ``wr_id_base + i`` and is
    signaled (it produces a completion).  ``regions``, if given, maps each lkey
    to its registered ``(addr, length)``: every local range must lie inside its
    region (``ValueError`` otherwise), so unregistered memory is caught here
    rather than by the device.  The batch holds no Python references to the
    memory; the caller keeps the regions registered while it is in flight.
    A batch may be posted again once its completions have arrived, but never
    from two threads at once (:func:`post` cuts the chain in place).
    """

    def __cinit__(self, int opcode, ops, regions=None, uint64_t wr_id_base=0):
        cdef Py_ssize_t i, n
        cdef uint64_t la, ra, ln
        self._wrs = NULL
        self._sges = NULL
        if opcode != OP_READ and opcode != OP_WRITE:
            raise ValueError(f"opcode must be OP_READ ({OP_READ}) or OP_WRITE ({OP_WRITE}), got {opcode!r}")
        ops = list(ops)
        n = len(ops)
        if n == 0:
            raise ValueError("ops must hold at least one (local_addr, lkey, remote_addr, rkey, length)")
        self.opcode = opcode
        self._wr_id_base = wr_id_base
        self._wrs = <mcy_ibv_send_wr*>calloc(n, sizeof(mcy_ibv_send_wr))
        self._sges = <mcy_ibv_sge*>calloc(n, sizeof(mcy_ibv_sge))
        if self._wrs == NULL or self._sges == NULL:
            raise MemoryError(f"cannot allocate {n} work requests")
        self._nbytes = 0
        for i in range(n):
            op = ops[i]
            if not isinstance(op, tuple) or len(op) != 5:
                raise TypeError(
                    f"ops[{i}] must be a tuple (local_addr, lkey, remote_addr, rkey, length), got {op!r}")
            ln = _u64(op[4], f"ops[{i}] length", 1, MAX_WR_LENGTH)
            la = _u64(op[0], f"ops[{i}] local_addr", 1, (1 << 64) - 1 - ln)
            ra = _u64(op[2], f"ops[{i}] remote_addr", 0, (1 << 64) - 1 - ln)
            lkey = _u64(op[1], f"ops[{i}] lkey", 0, 0xFFFFFFFF)
            rkey = _u64(op[3], f"ops[{i}] rkey", 0, 0xFFFFFFFF)
            if regions is not None:
                region = regions.get(lkey)
                if region is None:
                    raise ValueError(
                        f"ops[{i}]: local memory at {la:#x} uses lkey {lkey:#x}, which is not a "
                        "registered memory region")
                if la < region[0] or la + ln > region[0] + region[1]:
                    raise ValueError(
                        f"ops[{i}]: local range [{la:#x}, {la + ln:#x}) lies outside the region "
                        f"registered with lkey {lkey:#x} ([{region[0]:#x}, {region[0] + region[1]:#x}))")
            self._sges[i].addr = la
            self._sges[i].length = <uint32_t>ln
            self._sges[i].lkey = <uint32_t>lkey
            self._wrs[i].wr_id = wr_id_base + <uint64_t>i
            self._wrs[i].next = &self._wrs[i + 1] if i + 1 < n else NULL
            self._wrs[i].sg_list = &self._sges[i]
            self._wrs[i].num_sge = 1
            self._wrs[i].opcode = opcode
            self._wrs[i].send_flags = MCY_IBV_SEND_SIGNALED
            self._wrs[i].wr.rdma.remote_addr = ra
            self._wrs[i].wr.rdma.rkey = <uint32_t>rkey
            self._nbytes += ln
        self._n = n

    def __dealloc__(self):
        free(self._wrs)
        free(self._sges)

    def __len__(self):
        return self._n

    @property
    def nbytes(self):
        """Bytes moved by the whole batch."""
        return self._nbytes

    @property
    def wr_id_base(self):
        return self._wr_id_base


def post(qp, WorkBatch batch, Py_ssize_t start=0, Py_ssize_t count=-1):
    """Post work requests ``start .. start+count-1`` of ``batch`` (all by default) on ``qp``.

    One call to the provider for the whole range, GIL released.  The send queue
    must have room (at most ``max_send_wr`` outstanding): the caller windows
    large batches.  Returns the number posted.  On failure raises ``VerbsError``
    (the provider's errno; ``wr_id`` is the first request not posted, and the
    ones before it *were* posted and will complete).
    """
    cdef mcy_ibv_qp* q = <mcy_ibv_qp*>_handle(qp, "qp")
    cdef mcy_ibv_send_wr* bad = NULL
    cdef mcy_ibv_send_wr* last
    cdef mcy_ibv_send_wr* saved
    cdef int rc
    if batch is None:
        raise TypeError("batch must be a WorkBatch, got None")
    if count < 0:
        count = batch._n - start
    if start < 0 or count < 1 or start + count > batch._n:
        raise ValueError(f"start={start}, count={count} is not a range of the batch's {batch._n} requests")
    _need()
    last = &batch._wrs[start + count - 1]
    saved = last.next
    last.next = NULL
    with nogil:
        rc = mcy_ibv_post_send(q, &batch._wrs[start], &bad)
    last.next = saved
    if rc:
        name = _errno_mod.errorcode.get(rc, f"errno {rc}")
        bad_id = bad.wr_id if bad != NULL else None
        raise VerbsError(rc, name, _os.strerror(rc) + " (send queue full or request refused; "
                         "requests before wr_id were posted)", "ibv_post_send", bad_id)
    return count


def poll(cq, int max_entries=64):
    """Completions ready now: ``[(wr_id, status, opcode, byte_len, vendor_err)]``; never blocks."""
    cdef mcy_ibv_cq* q = <mcy_ibv_cq*>_handle(cq, "cq")
    cdef mcy_ibv_wc wc[64]
    cdef int got, i
    if not 1 <= max_entries <= 64:
        raise ValueError(f"max_entries must be in 1..64, got {max_entries!r}")
    _need()
    with nogil:
        got = mcy_ibv_poll_cq(q, max_entries, wc)
    if got < 0:
        _errno_fail(-got if got < -1 else _errno_mod.EIO, "ibv_poll_cq")
    return [(wc[i].wr_id, wc[i].status, wc[i].opcode, wc[i].byte_len, wc[i].vendor_err)
            for i in range(got)]


cdef double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


def wait(cq, Py_ssize_t count, double timeout=30.0):
    """Collect ``count`` completions from ``cq``, polling with the GIL released.

    Returns the ``wr_id`` of each, in completion order.  Empty polls back off
    from a short spin to sleeps of up to 200 us.  If any completion failed,
    raises ``VerbsError`` for the first failure (its ``ibv_wc_status`` name,
    libibverbs' text, its ``wr_id``) once ``count`` completions have arrived --
    on an RC queue pair the requests behind a failure complete as
    ``IBV_WC_WR_FLUSH_ERR``, so the queue is drained and reusable for nothing
    but teardown.  Raises ``VerbsTimeout`` if ``count`` completions have not
    arrived after ``timeout`` seconds.
    """
    cdef mcy_ibv_cq* q = <mcy_ibv_cq*>_handle(cq, "cq")
    cdef mcy_ibv_wc wc[32]
    cdef uint64_t* ids
    cdef Py_ssize_t got = 0, i
    cdef int n, empty = 0, poll_err = 0, first_err = -1
    cdef uint64_t err_wr = 0
    cdef uint32_t err_vendor = 0
    cdef double deadline
    cdef timespec ts
    if count < 1 or count > MAX_WAIT:
        raise ValueError(f"count must be in 1..{MAX_WAIT}, got {count!r}")
    if not timeout >= 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
    _need()
    ids = <uint64_t*>calloc(count, sizeof(uint64_t))
    if ids == NULL:
        raise MemoryError(f"cannot allocate {count} completion ids")
    try:
        with nogil:
            deadline = _now() + timeout
            while got < count:
                n = mcy_ibv_poll_cq(q, <int>min(<Py_ssize_t>32, count - got), wc)
                if n < 0:
                    poll_err = n
                    break
                for i in range(n):
                    ids[got + i] = wc[i].wr_id
                    if wc[i].status != MCY_IBV_WC_SUCCESS and first_err < 0:
                        first_err = wc[i].status
                        err_wr = wc[i].wr_id
                        err_vendor = wc[i].vendor_err
                got += n
                if n:
                    empty = 0
                    continue
                if _now() >= deadline:
                    break
                empty += 1
                if empty > 64:
                    ts.tv_sec = 0
                    ts.tv_nsec = 20000 if empty < 256 else 200000
                    nanosleep(&ts, NULL)
        if poll_err:
            _errno_fail(-poll_err if poll_err < -1 else _errno_mod.EIO, "ibv_poll_cq")
        if first_err >= 0:
            raise completion_error(first_err, err_wr, err_vendor)
        if got < count:
            raise VerbsTimeout(_errno_mod.ETIMEDOUT, "ETIMEDOUT",
                               f"{got} of {count} completions arrived within {timeout} s", "wait")
        return [ids[i] for i in range(count)]
    finally:
        free(ids)
