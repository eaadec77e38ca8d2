# cython: language_level=3
# C-level API of monarch_cy._hip_shim, for other Cython code:
#
#     from monarch_cy cimport _hip_shim as rt
#     cdef rt.mcy_rt_table* t = rt.runtime_table()      # GpuRuntimeUnavailable if unbound
#     with nogil:
#         st = t.fn.MemcpyAsync(dst, src, n, kind, stream)
#     rt.check_status(st, "MemcpyAsync")                 # GpuRuntimeError, as the shim raises
#
# Slot names are the CUDA runtime's function names without the ``cuda`` prefix
# (``MemcpyAsync``); on ROCm each slot holds the HIP function bound in its place.
# The types below mirror monarch_cy/include/mcy_cuda_names.h (shipped with the
# package as include/*.h: add that folder to the include path).  The header's
# tables (mcy_rt, mcy_drv) are static, so every C file including it has its own
# copy: the one the loader bound belongs to _hip_shim and is reached only through
# runtime_table() / driver_table(), never by declaring mcy_rt here.  Same rules as
# the Python API: the caller frees what it allocates, and a table must not be used
# across _hip_shim.unbind() (ask again after rebinding).  Vendor-specific values
# (attribute numbers, struct layouts) are in monarch_cy._platform_tables.

cdef extern from "mcy_cuda_names.h" nogil:
    ctypedef int cudaError_t
    ctypedef void* cudaStream_t
    ctypedef void* cudaEvent_t
    ctypedef struct cudaIpcMemHandle_t:
        char reserved[64]

    ctypedef struct mcy_rt_fns:
        cudaError_t (*GetDeviceCount)(int*) noexcept nogil
        cudaError_t (*GetDevice)(int*) noexcept nogil
        cudaError_t (*SetDevice)(int) noexcept nogil
        cudaError_t (*DeviceSynchronize)() noexcept nogil
        cudaError_t (*GetDeviceProperties)(void*, int) noexcept nogil
        cudaError_t (*DeviceGetAttribute)(int*, int, int) noexcept nogil
        cudaError_t (*DeviceGetPCIBusId)(char*, int, int) noexcept nogil
        cudaError_t (*DeviceCanAccessPeer)(int*, int, int) noexcept nogil
        cudaError_t (*DeviceEnablePeerAccess)(int, unsigned int) noexcept nogil
        cudaError_t (*RuntimeGetVersion)(int*) noexcept nogil
        cudaError_t (*DriverGetVersion)(int*) noexcept nogil
        cudaError_t (*MemGetInfo)(size_t*, size_t*) noexcept nogil
        cudaError_t (*Malloc)(void**, size_t) noexcept nogil
        cudaError_t (*Free)(void*) noexcept nogil
        cudaError_t (*HostAlloc)(void**, size_t, unsigned int) noexcept nogil
        cudaError_t (*FreeHost)(void*) noexcept nogil
        cudaError_t (*HostRegister)(void*, size_t, unsigned int) noexcept nogil
        cudaError_t (*HostUnregister)(void*) noexcept nogil
        cudaError_t (*Memcpy)(void*, const void*, size_t, int) noexcept nogil
        cudaError_t (*MemcpyAsync)(void*, const void*, size_t, int, cudaStream_t) noexcept nogil
        cudaError_t (*Memset)(void*, int, size_t) noexcept nogil
        cudaError_t (*MemsetAsync)(void*, int, size_t, cudaStream_t) noexcept nogil
        cudaError_t (*StreamCreateWithFlags)(cudaStream_t*, unsigned int) noexcept nogil
        cudaError_t (*StreamDestroy)(cudaStream_t) noexcept nogil
        cudaError_t (*StreamSynchronize)(cudaStream_t) noexcept nogil
        cudaError_t (*StreamQuery)(cudaStream_t) noexcept nogil
        cudaError_t (*StreamWaitEvent)(cudaStream_t, cudaEvent_t, unsigned int) noexcept nogil
        cudaError_t (*EventCreateWithFlags)(cudaEvent_t*, unsigned int) noexcept nogil
        cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t) noexcept nogil
        cudaError_t (*EventSynchronize)(cudaEvent_t) noexcept nogil
        cudaError_t (*EventQuery)(cudaEvent_t) noexcept nogil
        cudaError_t (*EventElapsedTime)(float*, cudaEvent_t, cudaEvent_t) noexcept nogil
        cudaError_t (*EventDestroy)(cudaEvent_t) noexcept nogil
        cudaError_t (*IpcGetMemHandle)(cudaIpcMemHandle_t*, void*) noexcept nogil
        cudaError_t (*IpcOpenMemHandle)(void**, cudaIpcMemHandle_t, unsigned int) noexcept nogil
        cudaError_t (*IpcCloseMemHandle)(void*) noexcept nogil
        cudaError_t (*PointerGetAttributes)(void*, const void*) noexcept nogil
        cudaError_t (*GetLastError)() noexcept nogil
        cudaError_t (*PeekAtLastError)() noexcept nogil
        const char* (*GetErrorName)(cudaError_t) noexcept nogil
        const char* (*GetErrorString)(cudaError_t) noexcept nogil

    ctypedef union mcy_rt_table:
        mcy_rt_fns fn
        void* slot[1]

    ctypedef unsigned long long mcy_devptr_t
    ctypedef struct mcy_drv_fns:
        int (*Init)(unsigned int) noexcept nogil
        int (*MemGetAddressRange)(mcy_devptr_t*, size_t*, mcy_devptr_t) noexcept nogil
        int (*MemGetHandleForAddressRange)(void*, mcy_devptr_t, size_t, int, unsigned long long) noexcept nogil
        int (*GetErrorName)(int, const char**) noexcept nogil
    ctypedef union mcy_drv_table:
        mcy_drv_fns fn
        void* slot[1]


# The bound runtime's table; raises GpuRuntimeUnavailable while none is bound.
cdef mcy_rt_table* runtime_table() except NULL

# The driver-level table (cuMemGetAddressRange, ... on CUDA; the HIP runtime's own on
# ROCm); needs the runtime bound.  A slot is NULL where the driver lacks the function.
cdef mcy_drv_table* driver_table() except NULL

# 0 for cudaSuccess; any other status clears the runtime's last error and raises
# GpuRuntimeError (OutOfMemoryError, NoDeviceError), as the shim's own calls do.
# ``call`` is the function's name without its prefix ("MemcpyAsync").
cdef int check_status(cudaError_t st, str call) except -1

# The same for a driver-level status (``call``: "MemGetAddressRange").
cdef int check_driver_status(int st, str call) except -1
