# cython: language_level=3
"""Flat Cython tier over NCCL / RCCL, bound at run time.

Rules, stated once for every function here:

* Names: the library's name with the ``nccl`` prefix dropped and the first
  letter lower-cased (``ncclAllReduce`` -> ``allReduce``).  RCCL exports the
  same names, so the same call serves both.
* Communicators, streams and buffers are plain ``int`` handles/addresses.  This
  tier owns nothing: a communicator made here is destroyed (or aborted) by the
  caller; :mod:`monarch_cy._collectives._nccl_comm` does that for you.
* Data types, reduction ops and results are the ints both libraries share
  (``DTYPE_*``, ``OP_*``, ``RESULT_*`` below; ``mcy_nccl_names.h`` proves them).
* A failing result raises :class:`~monarch_cy.errors.NcclError`
  with the library's description and ``ncclGetLastError``'s text.
  ``ncclInProgress`` is not a failure: calls on a non-blocking communicator
  return ``True`` while the work is still in progress (poll
  :func:`commGetAsyncError` until it is no longer ``RESULT_IN_PROGRESS``).
* Every call releases the GIL around the library call, through typed C
  function pointers stored in one table (``mcy_nccl``), never through ctypes.
* Calling before :func:`bind` raises ``NcclUnavailable``; calling an optional
  function the bound library lacks raises ``NcclUnavailable`` naming it.
  Negative counts, addresses or handles raise ``ValueError`` naming the
  parameter.  The tier cannot know whether an address or handle is live.

Binding: :mod:`monarch_cy._collectives._nccl_loader` opens the library (ctypes
finds and opens it only), resolves one address per :func:`function_names`
entry (0 for a missing optional one) and calls :func:`bind`.

Flat: this tier imports nothing of monarch_cy but the flat :mod:`monarch_cy._errors`
(where ``NcclError``/``NcclUnavailable`` are defined; ``monarch_cy.errors``
re-exports them).  Cython code can ``cimport`` it: ``_nccl_shim.pxd`` declares the
types, :func:`nccl_table` and :func:`check_result`.
"""

from libc.stdint cimport uintptr_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset as c_memset, memcpy as c_memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize

from monarch_cy._errors import NcclError, NcclUnavailable

# The types (ncclResult_t, the function table...) are declared in _nccl_shim.pxd;
# the table itself stays here: it is static in the header, so every C file that
# includes it has its own copy, and other modules reach this one through
# nccl_table() (see the .pxd).
cdef extern from "mcy_nccl_names.h" nogil:
    enum: MCY_NCCL_NFUNCS
    enum: MCY_NCCL_UNIQUE_ID_BYTES
    enum: MCY_NCCL_CONFIG_VERSION
    enum: MCY_NCCL_SUCCESS
    enum: MCY_NCCL_IN_PROGRESS
    enum: MCY_NCCL_SPLIT_NOCOLOR
    unsigned int MCY_NCCL_API_MAGIC
    const char* const mcy_nccl_names[]
    const int mcy_nccl_required[]
    mcy_nccl_table mcy_nccl

UNIQUE_ID_BYTES = MCY_NCCL_UNIQUE_ID_BYTES
SPLIT_NOCOLOR = MCY_NCCL_SPLIT_NOCOLOR

RESULT_SUCCESS = 0
RESULT_UNHANDLED_CUDA_ERROR = 1
RESULT_SYSTEM_ERROR = 2
RESULT_INTERNAL_ERROR = 3
RESULT_INVALID_ARGUMENT = 4
RESULT_INVALID_USAGE = 5
RESULT_REMOTE_ERROR = 6
RESULT_IN_PROGRESS = 7
RESULT_TIMEOUT = 8

OP_SUM = 0
OP_PROD = 1
OP_MAX = 2
OP_MIN = 3
OP_AVG = 4

DTYPE_INT8 = 0
DTYPE_UINT8 = 1
DTYPE_INT32 = 2
DTYPE_UINT32 = 3
DTYPE_INT64 = 4
DTYPE_UINT64 = 5
DTYPE_FLOAT16 = 6
DTYPE_FLOAT32 = 7
DTYPE_FLOAT64 = 8
DTYPE_BFLOAT16 = 9
DTYPE_FLOAT8E4M3 = 10
DTYPE_FLOAT8E5M2 = 11

cdef int _bound = 0
cdef int _version = 0


def function_names():
    """``[(symbol, required), ...]`` in table order: what :func:`bind` expects."""
    return [(mcy_nccl_names[i].decode(), bool(mcy_nccl_required[i])) for i in range(MCY_NCCL_NFUNCS)]


def bind(list addresses):
    """Install the library's function addresses (one per :func:`function_names` entry).

    A required entry must be a positive int; an optional one may be 0 (missing).
    Rebinding replaces the table; callers must not rebind while other threads
    call through it.
    """
    global _bound, _version
    cdef int v = 0
    cdef ncclResult_t st
    if len(addresses) != MCY_NCCL_NFUNCS:
        raise ValueError(
            f"addresses must hold {MCY_NCCL_NFUNCS} entries (one per function), got {len(addresses)}"
        )
    for i, a in enumerate(addresses):
        name = mcy_nccl_names[i].decode()
        if isinstance(a, bool) or not isinstance(a, int) or a < 0:
            raise ValueError(f"address of {name} must be a non-negative int, got {a!r}")
        if a == 0 and mcy_nccl_required[i]:
            raise ValueError(f"address of {name} must be non-zero: it is a required function")
    _bound = 0
    for i in range(MCY_NCCL_NFUNCS):
        mcy_nccl.slot[i] = <void*><uintptr_t>addresses[i]
    with nogil:
        st = mcy_nccl.fn.GetVersion(&v)
    _version = v if st == MCY_NCCL_SUCCESS else 0
    _bound = 1


def unbind():
    """Forget the bound library (it stays loaded).  For tests and shutdown."""
    global _bound, _version
    _bound = 0
    _version = 0
    c_memset(&mcy_nccl, 0, sizeof(mcy_nccl))


def is_bound():
    return bool(_bound)


def has(str name):
    """Whether the bound library provides ``name`` (``"CommSplit"``, no prefix)."""
    for i in range(MCY_NCCL_NFUNCS):
        if mcy_nccl_names[i].decode() == "nccl" + name:
            return bool(_bound) and mcy_nccl.slot[i] != NULL
    raise ValueError(f"name must be one of the table's functions, got {name!r}")


cdef int _not_bound() except -1:
    raise NcclUnavailable(
        "NCCL/RCCL is not bound; use monarch_cy.collectives (which loads it on first use) "
        "or monarch_cy._collectives._nccl_loader.ensure_loaded()"
    )


cdef inline int _need_bound() except -1:
    if not _bound:
        _not_bound()
    return 0


cdef int _missing(str name, str since) except -1:
    raise NcclUnavailable(
        f"the bound NCCL/RCCL library (version {_version}) lacks nccl{name}, new in {since}"
    )


cdef str _text(const char* s):
    if s == NULL:
        return ""
    return (<bytes>s).decode("utf-8", "replace")


cdef int _fail(ncclResult_t st, str call, ncclComm_t comm) except -1:
    cdef const char* msg
    cdef const char* last
    with nogil:
        msg = mcy_nccl.fn.GetErrorString(st)
        last = mcy_nccl.fn.GetLastError(comm)
    raise NcclError(st, _text(msg), _text(last), call)


cdef inline bint _check(ncclResult_t st, str call, ncclComm_t comm) except -1:
    """``True`` for ncclInProgress, ``False`` for success; raises otherwise."""
    if st == MCY_NCCL_SUCCESS:
        return False
    if st == MCY_NCCL_IN_PROGRESS:
        return True
    _fail(st, call, comm)
    return False


# ---------------------------------------------------------------- C-level API (_nccl_shim.pxd)

cdef mcy_nccl_table* nccl_table() except NULL:
    """The bound table, for Cython code that cimports this module."""
    _need_bound()
    return &mcy_nccl


cdef int check_result(ncclResult_t st, str call, ncclComm_t comm) except -1:
    """0 for success, 1 for ncclInProgress; raises NcclError otherwise."""
    if st != MCY_NCCL_SUCCESS and st != MCY_NCCL_IN_PROGRESS:
        _need_bound()           # the error text comes from the bound library
    return 1 if _check(st, call, comm) else 0


cdef uintptr_t _addr(object value, str param) except? 0:
    """An address or handle: a non-negative int below 2**64 (``None`` means 0)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{param} must be an int address or handle, got {value!r}")
    if value < 0 or value >= (1 << 64):
        raise ValueError(f"{param} must be a non-negative 64-bit address or handle, got {value!r}")
    return <uintptr_t>value


cdef ncclComm_t _comm(object value) except? NULL:
    cdef uintptr_t h = _addr(value, "comm")
    if h == 0:
        raise ValueError("comm must be a communicator handle, got 0 (NULL)")
    return <ncclComm_t>h


cdef size_t _count(object value, str param) except? 0:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{param} must be an int, got {value!r}")
    if value < 0 or value >= (1 << 63):
        raise ValueError(f"{param} must be in [0, 2**63), got {value!r}")
    return <size_t>value


cdef int _uid(object value, ncclUniqueId* out) except -1:
    if not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"unique_id must be {MCY_NCCL_UNIQUE_ID_BYTES} bytes, got {type(value).__name__}")
    if len(value) != MCY_NCCL_UNIQUE_ID_BYTES:
        raise ValueError(f"unique_id must be exactly {MCY_NCCL_UNIQUE_ID_BYTES} bytes, got {len(value)}")
    cdef bytes raw = bytes(value)
    c_memcpy(out.internal, <const char*>raw, MCY_NCCL_UNIQUE_ID_BYTES)
    return 0


cdef void _config(mcy_nccl_config* cfg, bint blocking) noexcept:
    c_memset(cfg, 0, sizeof(mcy_nccl_config))
    cfg.size = sizeof(mcy_nccl_config)
    cfg.magic = MCY_NCCL_API_MAGIC
    cfg.version = MCY_NCCL_CONFIG_VERSION
    cfg.blocking = 1 if blocking else 0


# ---------------------------------------------------------------- library

def getVersion():
    """The library's version code (NCCL 2.28.3 -> 22803; RCCL 2.13.4 -> 21304)."""
    cdef int v = 0
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.GetVersion(&v)
    _check(st, "GetVersion", NULL)
    return v


def getUniqueId():
    """A fresh 128-byte id (as ``bytes``); rank 0 makes it, every rank uses it."""
    cdef ncclUniqueId uid
    cdef ncclResult_t st
    _need_bound()
    c_memset(&uid, 0, sizeof(uid))
    with nogil:
        st = mcy_nccl.fn.GetUniqueId(&uid)
    _check(st, "GetUniqueId", NULL)
    return PyBytes_FromStringAndSize(uid.internal, MCY_NCCL_UNIQUE_ID_BYTES)


def getErrorString(int result):
    _need_bound()
    cdef const char* s
    with nogil:
        s = mcy_nccl.fn.GetErrorString(result)
    return _text(s)


def getLastError(comm=None):
    """The library's last error text (``comm`` may be ``None``); not cleared."""
    cdef ncclComm_t c = <ncclComm_t>_addr(comm, "comm")
    cdef const char* s
    _need_bound()
    with nogil:
        s = mcy_nccl.fn.GetLastError(c)
    return _text(s)


# ---------------------------------------------------------------- communicators

def commInitRank(int nranks, unique_id, int rank):
    """A blocking init: returns the communicator once all ``nranks`` ranks joined.

    Blocks (GIL released) until then: there is no bound on the wait.  Prefer
    :func:`commInitRankConfig` with ``blocking=False`` where available.
    """
    cdef ncclUniqueId uid
    cdef ncclComm_t c = NULL
    cdef ncclResult_t st
    _uid(unique_id, &uid)
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.CommInitRank(&c, nranks, uid, rank)
    _check(st, "CommInitRank", c)
    return <uintptr_t>c


def commInitRankConfig(int nranks, unique_id, int rank, bint blocking=True):
    """Init with a config: ``(comm, in_progress)``.

    With ``blocking=False`` the call returns at once; while ``in_progress``,
    poll :func:`commGetAsyncError` (and :func:`commAbort` to give up).  Needs
    NCCL >= 2.14.
    """
    cdef ncclUniqueId uid
    cdef ncclComm_t c = NULL
    cdef mcy_nccl_config cfg
    cdef ncclResult_t st
    _uid(unique_id, &uid)
    _need_bound()
    if mcy_nccl.fn.CommInitRankConfig == NULL:
        _missing("CommInitRankConfig", "2.14")
    _config(&cfg, blocking)
    with nogil:
        st = mcy_nccl.fn.CommInitRankConfig(&c, nranks, uid, rank, <ncclConfig_t*>&cfg)
    busy = _check(st, "CommInitRankConfig", c)
    return <uintptr_t>c, busy


def commSplit(comm, int color, int key, bint blocking=True):
    """Start ``ncclCommSplit``; returns ``(slot, in_progress)``.

    Collective over ``comm``: every rank calls it.  Needs NCCL >= 2.18.  NCCL
    writes the new communicator through its out-pointer, and for a
    non-blocking split it does so later, from its own thread (NCCL 2.28 on an
    H200: after the parent was idle again); so the pointer is a heap cell
    (``slot``), not a local.  :func:`splitPeek` reads it while waiting,
    :func:`splitResult` once the handle is there (0 for ``SPLIT_NOCOLOR``).
    The cell is never freed: freeing it after the handle appeared corrupted
    the heap on the H200 (NCCL's thread still writes it), so each split
    leaks these 8 bytes on purpose.
    """
    cdef ncclComm_t c = _comm(comm)
    cdef ncclComm_t* cell = <ncclComm_t*>malloc(sizeof(ncclComm_t))
    cdef mcy_nccl_config cfg
    cdef ncclResult_t st
    if cell == NULL:
        raise MemoryError("cannot allocate the split result cell")
    cell[0] = NULL
    try:
        _need_bound()
        if mcy_nccl.fn.CommSplit == NULL:
            _missing("CommSplit", "2.18")
        _config(&cfg, blocking)
        with nogil:
            st = mcy_nccl.fn.CommSplit(c, color, key, cell, <ncclConfig_t*>&cfg)
        busy = _check(st, "CommSplit", c)
    except BaseException:
        free(cell)  # the call failed outright: NCCL holds no reference to the cell
        raise
    return <uintptr_t>cell, busy


def splitPeek(slot):
    """What the :func:`commSplit` cell holds now (0 until NCCL has written it)."""
    cdef ncclComm_t* cell = <ncclComm_t*><uintptr_t>slot
    if cell == NULL:
        raise ValueError("slot must be the value commSplit returned, got 0")
    return <uintptr_t>cell[0]


def splitResult(slot):
    """The communicator a completed :func:`commSplit` wrote (the cell stays: see there)."""
    cdef ncclComm_t* cell = <ncclComm_t*><uintptr_t>slot
    if cell == NULL:
        raise ValueError("slot must be the value commSplit returned, got 0")
    return <uintptr_t>cell[0]


def commDestroy(comm):
    """Free the communicator after its enqueued work; ``True`` while in progress."""
    cdef ncclComm_t c = _comm(comm)
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.CommDestroy(c)
    return _check(st, "CommDestroy", NULL)


def commAbort(comm):
    """Stop all work of the communicator and free it; safe from another thread."""
    cdef ncclComm_t c = _comm(comm)
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.CommAbort(c)
    return _check(st, "CommAbort", NULL)


def commGetAsyncError(comm):
    """The communicator's asynchronous state as a result int (never raises for it).

    ``RESULT_SUCCESS``: healthy and idle on the host side; ``RESULT_IN_PROGRESS``:
    a non-blocking call is still running; anything else: the communicator is
    broken and should be aborted.
    """
    cdef ncclComm_t c = _comm(comm)
    cdef ncclResult_t err = 0
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.CommGetAsyncError(c, &err)
    _check(st, "CommGetAsyncError", c)
    return err


def commCount(comm):
    cdef ncclComm_t c = _comm(comm)
    cdef int n = 0
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.CommCount(c, &n)
    _check(st, "CommCount", c)
    return n


def commCuDevice(comm):
    cdef ncclComm_t c = _comm(comm)
    cdef int d = 0
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.CommCuDevice(c, &d)
    _check(st, "CommCuDevice", c)
    return d


def commUserRank(comm):
    cdef ncclComm_t c = _comm(comm)
    cdef int r = 0
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.CommUserRank(c, &r)
    _check(st, "CommUserRank", c)
    return r


# ---------------------------------------------------------------- operations
# Each enqueues on ``stream`` (0: the legacy default stream) and returns at once;
# ``True`` means a non-blocking communicator is still enqueuing (poll
# commGetAsyncError).  Buffers must stay alive until the stream reaches the op.

def allReduce(sendbuff, recvbuff, count, int datatype, int op, comm, stream):
    cdef const void* s = <const void*>_addr(sendbuff, "sendbuff")
    cdef void* r = <void*>_addr(recvbuff, "recvbuff")
    cdef size_t n = _count(count, "count")
    cdef ncclComm_t c = _comm(comm)
    cdef mcy_nccl_stream_t strm = <mcy_nccl_stream_t>_addr(stream, "stream")
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.AllReduce(s, r, n, datatype, op, c, strm)
    return _check(st, "AllReduce", c)


def broadcast(sendbuff, recvbuff, count, int datatype, int root, comm, stream):
    cdef const void* s = <const void*>_addr(sendbuff, "sendbuff")
    cdef void* r = <void*>_addr(recvbuff, "recvbuff")
    cdef size_t n = _count(count, "count")
    cdef ncclComm_t c = _comm(comm)
    cdef mcy_nccl_stream_t strm = <mcy_nccl_stream_t>_addr(stream, "stream")
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.Broadcast(s, r, n, datatype, root, c, strm)
    return _check(st, "Broadcast", c)


def reduce(sendbuff, recvbuff, count, int datatype, int op, int root, comm, stream):
    cdef const void* s = <const void*>_addr(sendbuff, "sendbuff")
    cdef void* r = <void*>_addr(recvbuff, "recvbuff")
    cdef size_t n = _count(count, "count")
    cdef ncclComm_t c = _comm(comm)
    cdef mcy_nccl_stream_t strm = <mcy_nccl_stream_t>_addr(stream, "stream")
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.Reduce(s, r, n, datatype, op, root, c, strm)
    return _check(st, "Reduce", c)


def allGather(sendbuff, recvbuff, sendcount, int datatype, comm, stream):
    cdef const void* s = <const void*>_addr(sendbuff, "sendbuff")
    cdef void* r = <void*>_addr(recvbuff, "recvbuff")
    cdef size_t n = _count(sendcount, "sendcount")
    cdef ncclComm_t c = _comm(comm)
    cdef mcy_nccl_stream_t strm = <mcy_nccl_stream_t>_addr(stream, "stream")
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.AllGather(s, r, n, datatype, c, strm)
    return _check(st, "AllGather", c)


def reduceScatter(sendbuff, recvbuff, recvcount, int datatype, int op, comm, stream):
    cdef const void* s = <const void*>_addr(sendbuff, "sendbuff")
    cdef void* r = <void*>_addr(recvbuff, "recvbuff")
    cdef size_t n = _count(recvcount, "recvcount")
    cdef ncclComm_t c = _comm(comm)
    cdef mcy_nccl_stream_t strm = <mcy_nccl_stream_t>_addr(stream, "stream")
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.ReduceScatter(s, r, n, datatype, op, c, strm)
    return _check(st, "ReduceScatter", c)


def send(sendbuff, count, int datatype, int peer, comm, stream):
    cdef const void* s = <const void*>_addr(sendbuff, "sendbuff")
    cdef size_t n = _count(count, "count")
    cdef ncclComm_t c = _comm(comm)
    cdef mcy_nccl_stream_t strm = <mcy_nccl_stream_t>_addr(stream, "stream")
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.Send(s, n, datatype, peer, c, strm)
    return _check(st, "Send", c)


def recv(recvbuff, count, int datatype, int peer, comm, stream):
    cdef void* r = <void*>_addr(recvbuff, "recvbuff")
    cdef size_t n = _count(count, "count")
    cdef ncclComm_t c = _comm(comm)
    cdef mcy_nccl_stream_t strm = <mcy_nccl_stream_t>_addr(stream, "stream")
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.Recv(r, n, datatype, peer, c, strm)
    return _check(st, "Recv", c)


def groupStart():
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.GroupStart()
    return _check(st, "GroupStart", NULL)


def groupEnd():
    """Launch the operations since :func:`groupStart`; ``True`` while in progress."""
    cdef ncclResult_t st
    _need_bound()
    with nogil:
        st = mcy_nccl.fn.GroupEnd()
    return _check(st, "GroupEnd", NULL)
