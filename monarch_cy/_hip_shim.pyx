# cython: language_level=3
"""Flat Cython tier over the GPU runtime, under CUDA names, bound at run time.

Rules, stated once for every function here:

* Names: the CUDA runtime's name with the ``cuda`` prefix dropped and the first
  letter lower-cased (``cudaMemcpyAsync`` -> ``memcpyAsync``).  On ROCm the same
  name calls the HIP function it is bound to (``hipMemcpyAsync``).
* Handles and addresses are plain ``int`` (streams, events, device pointers).
  This tier owns nothing: what it allocates, the caller frees (the owning tier,
  :mod:`monarch_cy.gpu`, does that for you).
* Results are returned, never written through out-parameters; a failing status
  raises :class:`~monarch_cy.errors.GpuRuntimeError` (``OutOfMemoryError`` for
  allocation failures, ``NoDeviceError`` where no GPU or driver is usable) after
  the runtime's last-error state has been cleared.  ``NotReady`` from the query
  functions is not an error: they return ``False``.
* Every call releases the GIL around the runtime call.  Calls go through typed C
  function pointers stored in one table (``mcy_rt``), never through ctypes.
* Calling anything before :func:`bind` raises ``GpuRuntimeUnavailable``; a
  negative size or pointer raises ``ValueError`` naming the parameter.  The shim
  cannot know whether a pointer is live: the owning tier checks that.

Binding: :mod:`monarch_cy._runtime` finds and opens the library (ctypes does the
finding and opening only), resolves one address per entry of
:func:`function_names`, and hands them to :func:`bind` with the platform's
vendor-specific values (:mod:`monarch_cy._platform_tables`).

Flat: this tier imports nothing of monarch_cy but the flat :mod:`monarch_cy._errors`.
Cython code can ``cimport`` it: ``_hip_shim.pxd`` declares the types,
:func:`runtime_table`, :func:`driver_table`, :func:`check_status` and
:func:`check_driver_status`.
"""

from libc.stdint cimport uintptr_t
from libc.string cimport memset as c_memset, memcpy as c_memcpy

cdef extern from "<string.h>" nogil:
    size_t strnlen(const char* s, size_t maxlen)
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from cpython.long cimport PyLong_CheckExact

cdef extern from "Python.h":
    # Declared without an exception spec: -1 with an error set is handled here.
    Py_ssize_t _as_ssize "PyLong_AsSsize_t"(object) noexcept

from operator import index as _operator_index

from monarch_cy._errors import (
    GpuRuntimeError,
    GpuRuntimeUnavailable,
    NoDeviceError,
    OutOfMemoryError,
)

# The types (cudaError_t, the function tables...) are declared in _hip_shim.pxd;
# the tables themselves stay here: they are static in the header, so every C file
# that includes it has its own copy, and other modules reach these through
# runtime_table() / driver_table() (see the .pxd).
cdef extern from "mcy_cuda_names.h" nogil:
    enum: MCY_DRV_NFUNCS
    enum: MCY_RANGE_HANDLE_DMA_BUF_FD
    const char* const mcy_drv_cuda_names[]
    const char* const mcy_drv_hip_names[]
    mcy_drv_table mcy_drv
    enum: MCY_RT_NFUNCS
    enum: MCY_SUCCESS
    enum: MCY_ERROR_MEMORY_ALLOCATION
    enum: MCY_ERROR_NOT_READY
    enum: MCY_IPC_HANDLE_SIZE
    const char* const mcy_rt_cuda_names[]
    const char* const mcy_rt_hip_names[]
    mcy_rt_table mcy_rt

# Copy kinds and flags both vendors share (the header proves them).
MEMCPY_HOST_TO_HOST = 0
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEVICE_TO_DEVICE = 3
MEMCPY_DEFAULT = 4
STREAM_DEFAULT = 0
STREAM_NON_BLOCKING = 1
EVENT_DEFAULT = 0
EVENT_BLOCKING_SYNC = 1
EVENT_DISABLE_TIMING = 2
EVENT_INTERPROCESS = 4
HOST_ALLOC_DEFAULT = 0
HOST_ALLOC_PORTABLE = 1
HOST_ALLOC_MAPPED = 2
HOST_REGISTER_DEFAULT = 0
HOST_REGISTER_PORTABLE = 1
HOST_REGISTER_MAPPED = 2
IPC_HANDLE_SIZE = MCY_IPC_HANDLE_SIZE

# Binding state.  _bound is a C int so that the check on every call costs nothing.
cdef int _bound = 0
cdef unsigned int _ipc_lazy_flag = 1
cdef object _platform = None
cdef object _table = None          # the PlatformTable in force
cdef object _no_device_statuses = frozenset()

DEF _PROP_BUFFER = 8192
DEF _PTR_ATTR_BUFFER = 512


def function_names():
    """``[(cuda_symbol, hip_symbol), ...]`` in table order: what :func:`bind` expects."""
    return [
        (mcy_rt_cuda_names[i].decode(), mcy_rt_hip_names[i].decode())
        for i in range(MCY_RT_NFUNCS)
    ]


def bind(str platform, list addresses, table):
    """Install the runtime's function addresses under their CUDA names.

    ``addresses`` holds one non-zero address per entry of :func:`function_names`,
    in that order; ``table`` is the :class:`~monarch_cy._platform_tables.PlatformTable`
    for this runtime.  Rebinding replaces the table (tests do this); callers must
    not rebind while other threads are calling through it.
    """
    global _bound, _platform, _table, _ipc_lazy_flag, _no_device_statuses
    if platform not in ("cuda", "rocm"):
        raise ValueError(f"platform must be 'cuda' or 'rocm', got {platform!r}")
    if len(addresses) != MCY_RT_NFUNCS:
        raise ValueError(
            f"addresses must hold {MCY_RT_NFUNCS} entries (one per function), got {len(addresses)}"
        )
    for i, a in enumerate(addresses):
        if not isinstance(a, int) or a <= 0:
            raise ValueError(f"address of {mcy_rt_cuda_names[i].decode()} must be a positive int, got {a!r}")
    if table.device_prop_size > _PROP_BUFFER or table.pointer_attrs_size > _PTR_ATTR_BUFFER:
        raise ValueError(f"table {table.name!r} declares structs larger than the shim's buffers")
    _bound = 0
    for i in range(MCY_RT_NFUNCS):
        mcy_rt.slot[i] = <void*><uintptr_t>addresses[i]
    _platform = platform
    _table = table
    _ipc_lazy_flag = table.ipc_lazy_enable_peer_access
    _no_device_statuses = frozenset(table.no_device_statuses)
    _bound = 1


def driver_function_names():
    """``[(cuda_driver_symbol, hip_symbol), ...]``: the optional driver-level table."""
    return [
        (mcy_drv_cuda_names[i].decode(), mcy_drv_hip_names[i].decode())
        for i in range(MCY_DRV_NFUNCS)
    ]


cdef str _drv_where = "no driver library was bound"


def bind_driver(list addresses, str where=""):
    """Install the optional driver-level functions; ``0`` marks one as absent.

    ``where`` says what was searched, for the error raised when an absent
    function is called.  Call after :func:`bind`.
    """
    global _drv_where
    if len(addresses) != MCY_DRV_NFUNCS:
        raise ValueError(f"addresses must hold {MCY_DRV_NFUNCS} entries, got {len(addresses)}")
    for i, a in enumerate(addresses):
        if not isinstance(a, int) or a < 0:
            raise ValueError(f"address of {mcy_drv_cuda_names[i].decode()} must be an int >= 0, got {a!r}")
        mcy_drv.slot[i] = <void*><uintptr_t>a
    _drv_where = where or "the driver library"


cdef int _need_drv(void* slot, str name) except -1:
    if not _bound:
        _not_bound()
    if slot == NULL:
        raise GpuRuntimeUnavailable(f"{name} is not available: {_drv_where} does not provide it")
    return 0


cdef int _drv_fail(int st, str call) except -1:
    cdef const char* name_p = NULL
    if mcy_drv.fn.GetErrorName != NULL:
        mcy_drv.fn.GetErrorName(st, &name_p)
        name = _text(name_p) or f"driver error {st}"
    elif _platform == "rocm":
        name = _text(mcy_rt.fn.GetErrorName(st))
    else:
        name = f"driver error {st}"
    cls = OutOfMemoryError if st == 2 else (NoDeviceError if st in _no_device_statuses else GpuRuntimeError)
    raise cls(st, name, name, call)


def memGetAddressRange(ptr):
    """``(base, size)`` of the allocation holding device address ``ptr`` (driver level)."""
    cdef mcy_devptr_t p = <mcy_devptr_t>_addr(ptr, "ptr")
    cdef mcy_devptr_t base = 0
    cdef size_t size = 0
    cdef int st
    _need_drv(<void*>mcy_drv.fn.MemGetAddressRange, "memGetAddressRange")
    with nogil:
        st = mcy_drv.fn.MemGetAddressRange(&base, &size, p)
    if st != 0:
        _drv_fail(st, "MemGetAddressRange")
    return <uintptr_t>base, size


def memGetDmaBufFd(ptr, size):
    """A dma-buf file descriptor for ``size`` bytes of device memory at ``ptr``.

    The caller owns the descriptor and must ``os.close`` it.  ``ptr`` and
    ``size`` must be page-aligned on CUDA.
    """
    cdef mcy_devptr_t p = <mcy_devptr_t>_addr(ptr, "ptr")
    cdef size_t n = _size(size, "size")
    cdef int fd = -1
    cdef int st
    _need_drv(<void*>mcy_drv.fn.MemGetHandleForAddressRange, "memGetDmaBufFd")
    with nogil:
        st = mcy_drv.fn.MemGetHandleForAddressRange(&fd, p, n, MCY_RANGE_HANDLE_DMA_BUF_FD, 0)
    if st != 0:
        _drv_fail(st, "MemGetHandleForAddressRange")
    return fd


def driverInit():
    """Initialise the driver API (idempotent; the runtime usually did already)."""
    cdef int st
    _need_drv(<void*>mcy_drv.fn.Init, "driverInit")
    with nogil:
        st = mcy_drv.fn.Init(0)
    if st != 0:
        _drv_fail(st, "Init")


def unbind():
    """Forget the bound runtime (the library stays loaded).  For tests and shutdown."""
    global _bound, _platform, _table
    _bound = 0
    _platform = None
    _table = None
    c_memset(&mcy_rt, 0, sizeof(mcy_rt))
    c_memset(&mcy_drv, 0, sizeof(mcy_drv))


def is_bound():
    """Whether :func:`bind` has installed a runtime."""
    return bool(_bound)


def bound_platform():
    """``"cuda"``, ``"rocm"``, or ``None`` when unbound."""
    return _platform


cdef int _not_bound() except -1:
    raise GpuRuntimeUnavailable(
        "the GPU runtime is not bound; use monarch_cy.gpu (which binds it on first use) "
        "or monarch_cy._runtime.ensure_bound()"
    )


cdef inline int _need_bound() except -1:
    if not _bound:
        _not_bound()
    return 0


cdef str _text(const char* s):
    if s == NULL:
        return ""
    return (<bytes>s).decode("utf-8", "replace")


cdef str _cstr(const char* p, size_t maxlen):
    """A NUL-terminated string of at most ``maxlen`` bytes, decoded."""
    return p[:strnlen(p, maxlen)].decode("utf-8", "replace")


cdef int _fail(cudaError_t st, str call) except -1:
    """Clear the last-error state and raise the matching GpuRuntimeError."""
    cdef const char* name_p
    cdef const char* msg_p
    with nogil:
        name_p = mcy_rt.fn.GetErrorName(st)
        msg_p = mcy_rt.fn.GetErrorString(st)
        mcy_rt.fn.GetLastError()
    name = _text(name_p) or f"error {st}"
    msg = _text(msg_p) or name
    if st == MCY_ERROR_MEMORY_ALLOCATION:
        cls = OutOfMemoryError
    elif st in _no_device_statuses:
        cls = NoDeviceError
    else:
        cls = GpuRuntimeError
    raise cls(st, name, msg, call)


cdef inline int _check(cudaError_t st, str call) except -1:
    if st != MCY_SUCCESS:
        _fail(st, call)
    return 0


# ---------------------------------------------------------------- C-level API (_hip_shim.pxd)

cdef mcy_rt_table* runtime_table() except NULL:
    """The bound runtime table, for Cython code that cimports this module."""
    _need_bound()
    return &mcy_rt


cdef mcy_drv_table* driver_table() except NULL:
    """The driver-level table (slots NULL where absent); needs the runtime bound."""
    _need_bound()
    return &mcy_drv


cdef int check_status(cudaError_t st, str call) except -1:
    """0 for success; raises the matching GpuRuntimeError otherwise (last error cleared)."""
    if st != MCY_SUCCESS:
        _need_bound()           # the error's name and text come from the bound runtime
        _fail(st, call)
    return 0


cdef int check_driver_status(int st, str call) except -1:
    """0 for success; raises the matching GpuRuntimeError for a driver-level status."""
    if st != 0:
        _need_bound()
        _drv_fail(st, call)
    return 0


cdef object _index(object value, str param, str what):
    """``operator.index(value)`` (numpy integers too), bools and others refused by name."""
    if isinstance(value, bool):
        raise TypeError(f"{param} must be {what}, got {value!r}")
    try:
        return _operator_index(value)
    except TypeError:
        raise TypeError(f"{param} must be {what}, got {value!r}") from None


cdef inline int _int_arg(object value, str param) except? -1:
    """A C ``int`` argument, named in the error when it is not one."""
    cdef Py_ssize_t r
    if PyLong_CheckExact(value):
        r = _as_ssize(value)
        if 0 <= r <= 2147483647:
            return <int>r
    return _int_arg_slow(value, param)


cdef int _int_arg_slow(object value, str param) except? -1:
    if PyErr_Occurred():
        PyErr_Clear()
    v = _index(value, param, "an int")
    if not -2147483648 <= v <= 2147483647:
        raise ValueError(f"{param} must fit in a C int, got {value!r}")
    return <int>v


cdef unsigned int _uint_arg(object value, str param) except? 0xFFFFFFFF:
    """A C ``unsigned int`` argument (flags), named in the error when it is not one."""
    v = _index(value, param, "a non-negative int")
    if not 0 <= v <= 0xFFFFFFFF:
        raise ValueError(f"{param} must fit in a C unsigned int, got {value!r}")
    return <unsigned int>v


cdef uintptr_t _addr_slow(object value, str param) except? 0:
    if value is None:
        return 0
    value = _index(value, param, "an int address")
    if value < 0:
        raise ValueError(f"{param} must be a non-negative address, got {value!r}")
    if value >= (1 << 64):
        raise ValueError(f"{param} is not an address: {value!r} does not fit in 64 bits")
    return <uintptr_t>value


cdef inline uintptr_t _addr(object value, str param) except? 0:
    """A pointer or handle argument: a non-negative int (``None`` means 0)."""
    cdef Py_ssize_t r
    if PyLong_CheckExact(value):
        r = _as_ssize(value)
        if r >= 0:
            return <uintptr_t>r
        if r == -1 and PyErr_Occurred():
            PyErr_Clear()
    return _addr_slow(value, param)


cdef size_t _size_slow(object value, str param) except? 0:
    value = _index(value, param, "an int")
    if value < 0:
        raise ValueError(f"{param} must be >= 0, got {value!r}")
    if value >= (1 << 63):
        raise ValueError(f"{param} is too large: {value!r}")
    return <size_t>value


cdef inline size_t _size(object value, str param) except? 0:
    """A byte count: a non-negative int below 2**63."""
    cdef Py_ssize_t r
    if PyLong_CheckExact(value):
        r = _as_ssize(value)
        if r >= 0:
            return <size_t>r
        if r == -1 and PyErr_Occurred():
            PyErr_Clear()
    return _size_slow(value, param)


# ---------------------------------------------------------------- devices

def getDeviceCount():
    cdef int n = 0
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.GetDeviceCount(&n)
    _check(st, "GetDeviceCount")
    return n


def getDevice():
    cdef int d = 0
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.GetDevice(&d)
    _check(st, "GetDevice")
    return d


def setDevice(device):
    cdef int c_device = _int_arg(device, "device")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.SetDevice(c_device)
    _check(st, "SetDevice")


def deviceSynchronize():
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.DeviceSynchronize()
    _check(st, "DeviceSynchronize")


def getDeviceProperties(device):
    """The fields the tables locate: ``{"name", "total_memory", "arch_name"}``.

    ``arch_name`` is the gfx architecture on ROCm where the layout is known,
    else ``None``.  Other properties come from :func:`deviceGetAttribute`.
    """
    cdef int c_device = _int_arg(device, "device")
    cdef char buf[_PROP_BUFFER]
    cdef cudaError_t st
    cdef size_t total = 0
    _need_bound()
    c_memset(buf, 0, _PROP_BUFFER)
    with nogil:
        st = mcy_rt.fn.GetDeviceProperties(<void*>buf, c_device)
    _check(st, "GetDeviceProperties")
    t = _table
    name = _cstr(buf + <int>t.prop_name_offset, 256)
    c_memcpy(&total, buf + <int>t.prop_total_mem_offset, sizeof(size_t))
    arch = None
    if t.prop_arch_name_offset is not None:
        arch = _cstr(buf + <int>t.prop_arch_name_offset, 256) or None
    return {"name": name, "total_memory": total, "arch_name": arch}


def deviceGetAttribute(attr, device):
    """The vendor's attribute number ``attr`` of ``device`` (numbers differ by vendor)."""
    cdef int c_attr = _int_arg(attr, "attr")
    cdef int c_device = _int_arg(device, "device")
    cdef int value = 0
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.DeviceGetAttribute(&value, c_attr, c_device)
    _check(st, "DeviceGetAttribute")
    return value


def deviceGetPCIBusId(device):
    cdef int c_device = _int_arg(device, "device")
    cdef char buf[64]
    cdef cudaError_t st
    _need_bound()
    c_memset(buf, 0, 64)
    with nogil:
        st = mcy_rt.fn.DeviceGetPCIBusId(buf, 63, c_device)
    _check(st, "DeviceGetPCIBusId")
    return _cstr(buf, 63)


def deviceCanAccessPeer(device, peer_device):
    cdef int c_device = _int_arg(device, "device")
    cdef int c_peer_device = _int_arg(peer_device, "peer_device")
    cdef int ok = 0
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.DeviceCanAccessPeer(&ok, c_device, c_peer_device)
    _check(st, "DeviceCanAccessPeer")
    return bool(ok)


def deviceEnablePeerAccess(peer_device, flags=0):
    """Enable access from the current device to ``peer_device``; already enabled is fine."""
    cdef int c_peer_device = _int_arg(peer_device, "peer_device")
    cdef unsigned int c_flags = _uint_arg(flags, "flags")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.DeviceEnablePeerAccess(c_peer_device, c_flags)
    if st == 704:  # PeerAccessAlreadyEnabled: same value on both vendors
        with nogil:
            mcy_rt.fn.GetLastError()
        return
    _check(st, "DeviceEnablePeerAccess")


def runtimeGetVersion():
    cdef int v = 0
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.RuntimeGetVersion(&v)
    _check(st, "RuntimeGetVersion")
    return v


def driverGetVersion():
    """The driver's version; 0 where no driver is installed (a cheap probe)."""
    cdef int v = 0
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.DriverGetVersion(&v)
    _check(st, "DriverGetVersion")
    return v


def memGetInfo():
    """``(free_bytes, total_bytes)`` of the current device."""
    cdef size_t free_b = 0, total_b = 0
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.MemGetInfo(&free_b, &total_b)
    _check(st, "MemGetInfo")
    return free_b, total_b


# ---------------------------------------------------------------- memory

def malloc(size):
    """Device memory of ``size`` bytes on the current device; free it with :func:`free`."""
    cdef void* p = NULL
    cdef size_t n = _size(size, "size")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.Malloc(&p, n)
    _check(st, "Malloc")
    return <uintptr_t>p


def free(ptr):
    cdef void* p = <void*>_addr(ptr, "ptr")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.Free(p)
    _check(st, "Free")


def hostAlloc(size, flags=0):
    """Page-locked host memory; free it with :func:`freeHost`."""
    cdef unsigned int c_flags = _uint_arg(flags, "flags")
    cdef void* p = NULL
    cdef size_t n = _size(size, "size")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.HostAlloc(&p, n, c_flags)
    _check(st, "HostAlloc")
    return <uintptr_t>p


def freeHost(ptr):
    cdef void* p = <void*>_addr(ptr, "ptr")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.FreeHost(p)
    _check(st, "FreeHost")


def hostRegister(ptr, size, flags=0):
    """Page-lock existing host memory; undo with :func:`hostUnregister`."""
    cdef unsigned int c_flags = _uint_arg(flags, "flags")
    cdef void* p = <void*>_addr(ptr, "ptr")
    cdef size_t n = _size(size, "size")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.HostRegister(p, n, c_flags)
    _check(st, "HostRegister")


def hostUnregister(ptr):
    cdef void* p = <void*>_addr(ptr, "ptr")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.HostUnregister(p)
    _check(st, "HostUnregister")


def memcpy(dst, src, size, kind):
    """Blocking copy of ``size`` bytes; ``kind`` is a MEMCPY_* value."""
    cdef int c_kind = _int_arg(kind, "kind")
    cdef void* d = <void*>_addr(dst, "dst")
    cdef const void* s = <const void*>_addr(src, "src")
    cdef size_t n = _size(size, "size")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.Memcpy(d, s, n, c_kind)
    _check(st, "Memcpy")


def memcpyAsync(dst, src, size, kind, stream):
    """Copy enqueued on ``stream`` (0: the legacy default stream); returns at once."""
    cdef int c_kind = _int_arg(kind, "kind")
    cdef void* d = <void*>_addr(dst, "dst")
    cdef const void* s = <const void*>_addr(src, "src")
    cdef size_t n = _size(size, "size")
    cdef cudaStream_t strm = <cudaStream_t>_addr(stream, "stream")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.MemcpyAsync(d, s, n, c_kind, strm)
    _check(st, "MemcpyAsync")


def memset(ptr, value, size):
    cdef int c_value = _int_arg(value, "value")
    cdef void* p = <void*>_addr(ptr, "ptr")
    cdef size_t n = _size(size, "size")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.Memset(p, c_value, n)
    _check(st, "Memset")


def memsetAsync(ptr, value, size, stream):
    cdef int c_value = _int_arg(value, "value")
    cdef void* p = <void*>_addr(ptr, "ptr")
    cdef size_t n = _size(size, "size")
    cdef cudaStream_t strm = <cudaStream_t>_addr(stream, "stream")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.MemsetAsync(p, c_value, n, strm)
    _check(st, "MemsetAsync")


# ---------------------------------------------------------------- streams

def streamCreateWithFlags(flags=0):
    cdef unsigned int c_flags = _uint_arg(flags, "flags")
    cdef cudaStream_t s = NULL
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.StreamCreateWithFlags(&s, c_flags)
    _check(st, "StreamCreateWithFlags")
    return <uintptr_t>s


def streamDestroy(stream):
    cdef cudaStream_t s = <cudaStream_t>_addr(stream, "stream")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.StreamDestroy(s)
    _check(st, "StreamDestroy")


def streamSynchronize(stream):
    cdef cudaStream_t s = <cudaStream_t>_addr(stream, "stream")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.StreamSynchronize(s)
    _check(st, "StreamSynchronize")


def streamQuery(stream):
    """``True`` when all work on ``stream`` is done, ``False`` while some is pending."""
    cdef cudaStream_t s = <cudaStream_t>_addr(stream, "stream")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.StreamQuery(s)
    if st == MCY_ERROR_NOT_READY:
        with nogil:
            mcy_rt.fn.GetLastError()
        return False
    _check(st, "StreamQuery")
    return True


def streamWaitEvent(stream, event, flags=0):
    cdef unsigned int c_flags = _uint_arg(flags, "flags")
    cdef cudaStream_t s = <cudaStream_t>_addr(stream, "stream")
    cdef cudaEvent_t e = <cudaEvent_t>_addr(event, "event")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.StreamWaitEvent(s, e, c_flags)
    _check(st, "StreamWaitEvent")


# ---------------------------------------------------------------- events

def eventCreateWithFlags(flags=0):
    cdef unsigned int c_flags = _uint_arg(flags, "flags")
    cdef cudaEvent_t e = NULL
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.EventCreateWithFlags(&e, c_flags)
    _check(st, "EventCreateWithFlags")
    return <uintptr_t>e


def eventRecord(event, stream):
    cdef cudaEvent_t e = <cudaEvent_t>_addr(event, "event")
    cdef cudaStream_t s = <cudaStream_t>_addr(stream, "stream")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.EventRecord(e, s)
    _check(st, "EventRecord")


def eventSynchronize(event):
    cdef cudaEvent_t e = <cudaEvent_t>_addr(event, "event")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.EventSynchronize(e)
    _check(st, "EventSynchronize")


def eventQuery(event):
    """``True`` when the work before the event's record is done."""
    cdef cudaEvent_t e = <cudaEvent_t>_addr(event, "event")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.EventQuery(e)
    if st == MCY_ERROR_NOT_READY:
        with nogil:
            mcy_rt.fn.GetLastError()
        return False
    _check(st, "EventQuery")
    return True


def eventElapsedTime(start, end):
    """Milliseconds between two recorded events."""
    cdef cudaEvent_t a = <cudaEvent_t>_addr(start, "start")
    cdef cudaEvent_t b = <cudaEvent_t>_addr(end, "end")
    cdef float ms = 0
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.EventElapsedTime(&ms, a, b)
    _check(st, "EventElapsedTime")
    return ms


def eventDestroy(event):
    cdef cudaEvent_t e = <cudaEvent_t>_addr(event, "event")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.EventDestroy(e)
    _check(st, "EventDestroy")


# ---------------------------------------------------------------- IPC

def ipcGetMemHandle(ptr):
    """The 64-byte IPC handle of the allocation that starts at ``ptr``."""
    cdef cudaIpcMemHandle_t h
    cdef void* p = <void*>_addr(ptr, "ptr")
    cdef cudaError_t st
    _need_bound()
    c_memset(&h, 0, sizeof(h))
    with nogil:
        st = mcy_rt.fn.IpcGetMemHandle(&h, p)
    _check(st, "IpcGetMemHandle")
    return PyBytes_FromStringAndSize(h.reserved, MCY_IPC_HANDLE_SIZE)


def ipcOpenMemHandle(bytes handle not None, flags=None):
    """Map another process's allocation; ``flags`` defaults to lazy peer access.

    Close the mapping with :func:`ipcCloseMemHandle`.
    """
    cdef cudaIpcMemHandle_t h
    cdef void* p = NULL
    cdef unsigned int f = _ipc_lazy_flag if flags is None else _uint_arg(flags, "flags")
    cdef cudaError_t st
    if len(handle) != MCY_IPC_HANDLE_SIZE:
        raise ValueError(f"handle must be exactly {MCY_IPC_HANDLE_SIZE} bytes, got {len(handle)}")
    _need_bound()
    c_memcpy(h.reserved, <const char*>handle, MCY_IPC_HANDLE_SIZE)
    with nogil:
        st = mcy_rt.fn.IpcOpenMemHandle(&p, h, f)
    _check(st, "IpcOpenMemHandle")
    return <uintptr_t>p


def ipcCloseMemHandle(ptr):
    cdef void* p = <void*>_addr(ptr, "ptr")
    cdef cudaError_t st
    _need_bound()
    with nogil:
        st = mcy_rt.fn.IpcCloseMemHandle(p)
    _check(st, "IpcCloseMemHandle")


def pointerGetAttributes(ptr):
    """``(memory_type, device, device_pointer, host_pointer)`` of an address.

    ``memory_type`` is one of ``"unregistered"``, ``"host"``, ``"device"``,
    ``"managed"`` whatever the vendor's numbering.  Memory the runtime does not
    know is ``("unregistered", -1, 0, 0)``; runtimes that report such memory as
    an invalid-value error (HIP 5) are normalised to that answer.
    """
    cdef char buf[_PTR_ATTR_BUFFER]
    cdef const void* p = <const void*>_addr(ptr, "ptr")
    cdef cudaError_t st
    cdef int mtype = 0, dev = 0, managed = 0
    cdef uintptr_t dptr = 0, hptr = 0
    _need_bound()
    c_memset(buf, 0, _PTR_ATTR_BUFFER)
    with nogil:
        st = mcy_rt.fn.PointerGetAttributes(<void*>buf, p)
    if st == 1 and _platform == "rocm":  # hipErrorInvalidValue: memory HIP never saw
        with nogil:
            mcy_rt.fn.GetLastError()
        return ("unregistered", -1, 0, 0)
    _check(st, "PointerGetAttributes")
    t = _table
    c_memcpy(&mtype, buf + <int>t.pointer_type_offset, sizeof(int))
    c_memcpy(&dev, buf + <int>t.pointer_device_offset, sizeof(int))
    c_memcpy(&dptr, buf + <int>t.pointer_devptr_offset, sizeof(uintptr_t))
    c_memcpy(&hptr, buf + <int>t.pointer_hostptr_offset, sizeof(uintptr_t))
    kind = t.memory_type_names.get(mtype, "unregistered")
    if t.pointer_managed_offset is not None:
        c_memcpy(&managed, buf + <int>t.pointer_managed_offset, sizeof(int))
        if managed:
            kind = "managed"
    if kind == "unregistered":
        dev = -1
    return (kind, dev, dptr, hptr)


# ---------------------------------------------------------------- errors

def getLastError():
    """Return and clear the runtime's last error status (0 when none)."""
    _need_bound()
    cdef cudaError_t st
    with nogil:
        st = mcy_rt.fn.GetLastError()
    return st


def peekAtLastError():
    """Return the runtime's last error status without clearing it."""
    _need_bound()
    cdef cudaError_t st
    with nogil:
        st = mcy_rt.fn.PeekAtLastError()
    return st


def getErrorName(status):
    cdef int c_status = _int_arg(status, "status")
    _need_bound()
    cdef const char* s
    with nogil:
        s = mcy_rt.fn.GetErrorName(c_status)
    return _text(s)


def getErrorString(status):
    cdef int c_status = _int_arg(status, "status")
    _need_bound()
    cdef const char* s
    with nogil:
        s = mcy_rt.fn.GetErrorString(c_status)
    return _text(s)
