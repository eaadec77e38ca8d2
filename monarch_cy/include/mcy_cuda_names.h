/*
 * mcy_cuda_names.h -- the GPU runtime under CUDA names, for CUDA and HIP alike.
 *
 * Code above this header speaks CUDA names only.  The runtime library itself is
 * opened at run time (libcudart or libamdhip64) and each symbol's address is
 * stored in `mcy_rt` under its CUDA name, so that one build serves both vendors
 * and imports on machines with neither.
 *
 * Three ways to compile this header:
 *
 *   default            no vendor header needed; the types below are declared
 *                      here with the ABI both vendors share (handles are
 *                      pointers, status codes and enums are 32-bit ints, IPC
 *                      handles are 64 opaque bytes).
 *   MCY_VENDOR_CUDA    include the real <cuda_runtime_api.h>; every function
 *                      pointer type below is then checked against the real
 *                      prototype (a mismatch is a compile error).
 *   MCY_VENDOR_HIP     include the real <hip/hip_runtime_api.h>, alias the CUDA
 *                      names to the HIP types, and check each prototype against
 *                      the HIP function the CUDA name binds to.
 *
 * Values that differ between vendors (device attribute numbers, the IPC
 * lazy-peer flag, pointer-attribute layouts, versioned symbol names) are NOT
 * here: they live in monarch_cy/_platform_tables.py, checked against the real
 * headers by tests/test_vendor_headers.py and against AMD's hip-python bindings
 * (one per ROCm release) by tests/test_hip_python_proof.py.  Only values both vendors share are
 * defined below, as MCY_* constants.
 */
#ifndef MCY_CUDA_NAMES_H
#define MCY_CUDA_NAMES_H

#include <stddef.h>

#if defined(MCY_VENDOR_CUDA) && defined(MCY_VENDOR_HIP)
#error "define at most one of MCY_VENDOR_CUDA and MCY_VENDOR_HIP"
#endif

#if defined(MCY_VENDOR_CUDA)
#include <cuda_runtime_api.h>
#include <cuda.h>
typedef CUresult mcy_drv_status_t;
typedef CUdeviceptr mcy_devptr_t;
typedef CUmemRangeHandleType mcy_range_handle_t;
#define MCY_DEVICE_PROP_T struct cudaDeviceProp
#define MCY_POINTER_ATTRS_T struct cudaPointerAttributes
typedef enum cudaDeviceAttr mcy_device_attr_t;
typedef enum cudaMemcpyKind mcy_memcpy_kind_t;

#elif defined(MCY_VENDOR_HIP)
#include <hip/hip_runtime_api.h>
typedef hipError_t cudaError_t;
typedef hipStream_t cudaStream_t;
typedef hipEvent_t cudaEvent_t;
typedef hipIpcMemHandle_t cudaIpcMemHandle_t;
typedef hipError_t mcy_drv_status_t;
typedef hipDeviceptr_t mcy_devptr_t;
typedef int mcy_range_handle_t; /* hipMemRangeHandleType: ROCm 7.0+ only */
#define MCY_DEVICE_PROP_T hipDeviceProp_t
#define MCY_POINTER_ATTRS_T hipPointerAttribute_t
typedef hipDeviceAttribute_t mcy_device_attr_t;
typedef hipMemcpyKind mcy_memcpy_kind_t;

#else
typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct cudaIpcMemHandle_st { char reserved[64]; } cudaIpcMemHandle_t;
/* Opaque here: the shim only ever passes a buffer of ample size and reads the
 * fields at offsets taken from the per-platform tables. */
#define MCY_DEVICE_PROP_T struct cudaDeviceProp
#define MCY_POINTER_ATTRS_T struct cudaPointerAttributes
struct cudaDeviceProp;
struct cudaPointerAttributes;
typedef int mcy_device_attr_t;
typedef int mcy_memcpy_kind_t;
/* Driver-level types: a CUresult/hipError_t is an int; a device pointer is 64
 * bits wide on both (CUdeviceptr is unsigned long long, hipDeviceptr_t a void*,
 * passed alike on LP64 targets). */
typedef int mcy_drv_status_t;
typedef unsigned long long mcy_devptr_t;
typedef int mcy_range_handle_t;
#endif

/* Values both vendors share (CUDA 12/13 and HIP 5.2+): proven against the CUDA 12.0-13.5 and
 * HIP 5.2 headers by tests/test_vendor_headers.py, ROCm 6.2-7.2 by tests/test_hip_python_proof.py. */
#define MCY_SUCCESS 0
#define MCY_ERROR_INVALID_VALUE 1
#define MCY_ERROR_MEMORY_ALLOCATION 2
#define MCY_ERROR_NOT_INITIALIZED 3
#define MCY_ERROR_NO_DEVICE 100
#define MCY_ERROR_INVALID_DEVICE 101
#define MCY_ERROR_NOT_READY 600
#define MCY_ERROR_PEER_ACCESS_ALREADY_ENABLED 704
#define MCY_MEMCPY_HOST_TO_HOST 0
#define MCY_MEMCPY_HOST_TO_DEVICE 1
#define MCY_MEMCPY_DEVICE_TO_HOST 2
#define MCY_MEMCPY_DEVICE_TO_DEVICE 3
#define MCY_MEMCPY_DEFAULT 4
#define MCY_STREAM_DEFAULT 0
#define MCY_STREAM_NON_BLOCKING 1
#define MCY_EVENT_DEFAULT 0
#define MCY_EVENT_BLOCKING_SYNC 1
#define MCY_EVENT_DISABLE_TIMING 2
#define MCY_EVENT_INTERPROCESS 4
#define MCY_HOST_ALLOC_DEFAULT 0
#define MCY_HOST_ALLOC_PORTABLE 1
#define MCY_HOST_ALLOC_MAPPED 2
#define MCY_HOST_REGISTER_DEFAULT 0
#define MCY_HOST_REGISTER_PORTABLE 1
#define MCY_HOST_REGISTER_MAPPED 2
#define MCY_IPC_HANDLE_SIZE 64

/*
 * The runtime's functions: X(cuda name without prefix, HIP symbol, return, parameters).
 * The loader binds "cuda" + name on CUDA and the HIP symbol on ROCm (or a
 * versioned alternative listed in _platform_tables.py).
 */
#define MCY_RUNTIME_FUNCTIONS(X) \
    X(GetDeviceCount, hipGetDeviceCount, cudaError_t, (int *count)) \
    X(GetDevice, hipGetDevice, cudaError_t, (int *device)) \
    X(SetDevice, hipSetDevice, cudaError_t, (int device)) \
    X(DeviceSynchronize, hipDeviceSynchronize, cudaError_t, (void)) \
    X(GetDeviceProperties, hipGetDeviceProperties, cudaError_t, (MCY_DEVICE_PROP_T *prop, int device)) \
    X(DeviceGetAttribute, hipDeviceGetAttribute, cudaError_t, (int *value, mcy_device_attr_t attr, int device)) \
    X(DeviceGetPCIBusId, hipDeviceGetPCIBusId, cudaError_t, (char *pciBusId, int len, int device)) \
    X(DeviceCanAccessPeer, hipDeviceCanAccessPeer, cudaError_t, (int *canAccessPeer, int device, int peerDevice)) \
    X(DeviceEnablePeerAccess, hipDeviceEnablePeerAccess, cudaError_t, (int peerDevice, unsigned int flags)) \
    X(RuntimeGetVersion, hipRuntimeGetVersion, cudaError_t, (int *runtimeVersion)) \
    X(DriverGetVersion, hipDriverGetVersion, cudaError_t, (int *driverVersion)) \
    X(MemGetInfo, hipMemGetInfo, cudaError_t, (size_t *free, size_t *total)) \
    X(Malloc, hipMalloc, cudaError_t, (void **devPtr, size_t size)) \
    X(Free, hipFree, cudaError_t, (void *devPtr)) \
    X(HostAlloc, hipHostMalloc, cudaError_t, (void **pHost, size_t size, unsigned int flags)) \
    X(FreeHost, hipHostFree, cudaError_t, (void *ptr)) \
    X(HostRegister, hipHostRegister, cudaError_t, (void *ptr, size_t size, unsigned int flags)) \
    X(HostUnregister, hipHostUnregister, cudaError_t, (void *ptr)) \
    X(Memcpy, hipMemcpy, cudaError_t, (void *dst, const void *src, size_t count, mcy_memcpy_kind_t kind)) \
    X(MemcpyAsync, hipMemcpyAsync, cudaError_t, (void *dst, const void *src, size_t count, mcy_memcpy_kind_t kind, cudaStream_t stream)) \
    X(Memset, hipMemset, cudaError_t, (void *devPtr, int value, size_t count)) \
    X(MemsetAsync, hipMemsetAsync, cudaError_t, (void *devPtr, int value, size_t count, cudaStream_t stream)) \
    X(StreamCreateWithFlags, hipStreamCreateWithFlags, cudaError_t, (cudaStream_t *pStream, unsigned int flags)) \
    X(StreamDestroy, hipStreamDestroy, cudaError_t, (cudaStream_t stream)) \
    X(StreamSynchronize, hipStreamSynchronize, cudaError_t, (cudaStream_t stream)) \
    X(StreamQuery, hipStreamQuery, cudaError_t, (cudaStream_t stream)) \
    X(StreamWaitEvent, hipStreamWaitEvent, cudaError_t, (cudaStream_t stream, cudaEvent_t event, unsigned int flags)) \
    X(EventCreateWithFlags, hipEventCreateWithFlags, cudaError_t, (cudaEvent_t *event, unsigned int flags)) \
    X(EventRecord, hipEventRecord, cudaError_t, (cudaEvent_t event, cudaStream_t stream)) \
    X(EventSynchronize, hipEventSynchronize, cudaError_t, (cudaEvent_t event)) \
    X(EventQuery, hipEventQuery, cudaError_t, (cudaEvent_t event)) \
    X(EventElapsedTime, hipEventElapsedTime, cudaError_t, (float *ms, cudaEvent_t start, cudaEvent_t end)) \
    X(EventDestroy, hipEventDestroy, cudaError_t, (cudaEvent_t event)) \
    X(IpcGetMemHandle, hipIpcGetMemHandle, cudaError_t, (cudaIpcMemHandle_t *handle, void *devPtr)) \
    X(IpcOpenMemHandle, hipIpcOpenMemHandle, cudaError_t, (void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags)) \
    X(IpcCloseMemHandle, hipIpcCloseMemHandle, cudaError_t, (void *devPtr)) \
    X(PointerGetAttributes, hipPointerGetAttributes, cudaError_t, (MCY_POINTER_ATTRS_T *attributes, const void *ptr)) \
    X(GetLastError, hipGetLastError, cudaError_t, (void)) \
    X(PeekAtLastError, hipPeekAtLastError, cudaError_t, (void)) \
    X(GetErrorName, hipGetErrorName, const char *, (cudaError_t error)) \
    X(GetErrorString, hipGetErrorString, const char *, (cudaError_t error))

/* One function-pointer type per function: mcy_<Name>_t. */
#define MCY_DECLARE_TYPE(name, hip, ret, params) typedef ret (*mcy_##name##_t) params;
MCY_RUNTIME_FUNCTIONS(MCY_DECLARE_TYPE)
#undef MCY_DECLARE_TYPE

/* The table: typed fields for calls, and the same storage as slots for binding. */
#define MCY_DECLARE_FIELD(name, hip, ret, params) mcy_##name##_t name;
typedef struct mcy_rt_fns { MCY_RUNTIME_FUNCTIONS(MCY_DECLARE_FIELD) } mcy_rt_fns;
#undef MCY_DECLARE_FIELD

#define MCY_COUNT_ONE(name, hip, ret, params) +1
enum { MCY_RT_NFUNCS = 0 MCY_RUNTIME_FUNCTIONS(MCY_COUNT_ONE) };
#undef MCY_COUNT_ONE

typedef union mcy_rt_table {
    mcy_rt_fns fn;
    void *slot[MCY_RT_NFUNCS];
} mcy_rt_table;

#define MCY_CUDA_NAME(name, hip, ret, params) "cuda" #name,
#define MCY_HIP_NAME(name, hip, ret, params) #hip,
static const char *const mcy_rt_cuda_names[MCY_RT_NFUNCS] = { MCY_RUNTIME_FUNCTIONS(MCY_CUDA_NAME) };
static const char *const mcy_rt_hip_names[MCY_RT_NFUNCS] = { MCY_RUNTIME_FUNCTIONS(MCY_HIP_NAME) };
#undef MCY_CUDA_NAME
#undef MCY_HIP_NAME

/* The process's one table; bound by monarch_cy._hip_shim.bind(). */
static mcy_rt_table mcy_rt __attribute__((unused));

/*
 * Driver-level extras, optional: X(name, CUDA driver symbol, HIP symbol, parameters).
 * On CUDA they come from libcuda (the driver), on ROCm from libamdhip64 itself.
 * A runtime without one leaves its slot NULL and the shim reports it unavailable.
 */
#define MCY_DRIVER_FUNCTIONS(X) \
    X(Init, cuInit, hipInit, (unsigned int flags)) \
    X(MemGetAddressRange, cuMemGetAddressRange, hipMemGetAddressRange, (mcy_devptr_t *pbase, size_t *psize, mcy_devptr_t dptr)) \
    X(MemGetHandleForAddressRange, cuMemGetHandleForAddressRange, hipMemGetHandleForAddressRange, (void *handle, mcy_devptr_t dptr, size_t size, mcy_range_handle_t handleType, unsigned long long flags)) \
    X(GetErrorName, cuGetErrorName, hipDrvGetErrorName, (mcy_drv_status_t error, const char **pStr))

#define MCY_DECLARE_DRV_TYPE(name, cu, hip, params) typedef mcy_drv_status_t (*mcy_drv_##name##_t) params;
MCY_DRIVER_FUNCTIONS(MCY_DECLARE_DRV_TYPE)
#undef MCY_DECLARE_DRV_TYPE
#define MCY_DECLARE_DRV_FIELD(name, cu, hip, params) mcy_drv_##name##_t name;
typedef struct mcy_drv_fns { MCY_DRIVER_FUNCTIONS(MCY_DECLARE_DRV_FIELD) } mcy_drv_fns;
#undef MCY_DECLARE_DRV_FIELD
#define MCY_COUNT_ONE(name, cu, hip, params) +1
enum { MCY_DRV_NFUNCS = 0 MCY_DRIVER_FUNCTIONS(MCY_COUNT_ONE) };
#undef MCY_COUNT_ONE
typedef union mcy_drv_table { mcy_drv_fns fn; void *slot[MCY_DRV_NFUNCS]; } mcy_drv_table;
#define MCY_CU_NAME(name, cu, hip, params) #cu,
#define MCY_HIPDRV_NAME(name, cu, hip, params) #hip,
static const char *const mcy_drv_cuda_names[MCY_DRV_NFUNCS] = { MCY_DRIVER_FUNCTIONS(MCY_CU_NAME) };
static const char *const mcy_drv_hip_names[MCY_DRV_NFUNCS] = { MCY_DRIVER_FUNCTIONS(MCY_HIPDRV_NAME) };
#undef MCY_CU_NAME
#undef MCY_HIPDRV_NAME
static mcy_drv_table mcy_drv __attribute__((unused));
#define MCY_RANGE_HANDLE_DMA_BUF_FD 1

/*
 * Vendor builds: each pointer type must be exactly the real function's type
 * (compared at compile time; no reference to the symbol is emitted, so nothing
 * links against the vendor library).  A mismatch stops the build.
 */
#if defined(MCY_VENDOR_CUDA)
#define MCY_CHECK_PROTO(name, hip, ret, params) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&cuda##name), mcy_##name##_t), \
                   "prototype of cuda" #name " differs from mcy_" #name "_t");
MCY_RUNTIME_FUNCTIONS(MCY_CHECK_PROTO)
#undef MCY_CHECK_PROTO
#define MCY_CHECK_DRV_PROTO(name, cu, hip, params) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&cu), mcy_drv_##name##_t), \
                   "prototype of " #cu " differs from mcy_drv_" #name "_t");
MCY_DRIVER_FUNCTIONS(MCY_CHECK_DRV_PROTO)
#undef MCY_CHECK_DRV_PROTO
_Static_assert(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD == MCY_RANGE_HANDLE_DMA_BUF_FD, "dma-buf handle type differs");
#elif defined(MCY_VENDOR_HIP)
#define MCY_CHECK_PROTO(name, hip, ret, params) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&hip), mcy_##name##_t), \
                   "prototype of " #hip " differs from mcy_" #name "_t");
MCY_RUNTIME_FUNCTIONS(MCY_CHECK_PROTO)
#undef MCY_CHECK_PROTO
/* hipDrvGetErrorName exists from ROCm 6, hipMemGetHandleForAddressRange from ROCm 7 (the
 * hip-python proof, tests/test_hip_python_proof.py); HIP 5 headers lack both. */
_Static_assert(__builtin_types_compatible_p(__typeof__(&hipInit), mcy_drv_Init_t), "prototype of hipInit differs");
_Static_assert(__builtin_types_compatible_p(__typeof__(&hipMemGetAddressRange), mcy_drv_MemGetAddressRange_t),
               "prototype of hipMemGetAddressRange differs");
#endif

#if defined(MCY_VENDOR_CUDA) || defined(MCY_VENDOR_HIP)
#define MCY_SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " differs from the vendor's " #b);
#if defined(MCY_VENDOR_CUDA)
#define MCY_V(cuda, hip) cuda
#else
#define MCY_V(cuda, hip) hip
#endif
MCY_SAME(MCY_SUCCESS, MCY_V(cudaSuccess, hipSuccess))
MCY_SAME(MCY_ERROR_INVALID_VALUE, MCY_V(cudaErrorInvalidValue, hipErrorInvalidValue))
MCY_SAME(MCY_ERROR_MEMORY_ALLOCATION, MCY_V(cudaErrorMemoryAllocation, hipErrorOutOfMemory))
MCY_SAME(MCY_ERROR_NOT_INITIALIZED, MCY_V(cudaErrorInitializationError, hipErrorNotInitialized))
MCY_SAME(MCY_ERROR_NO_DEVICE, MCY_V(cudaErrorNoDevice, hipErrorNoDevice))
MCY_SAME(MCY_ERROR_INVALID_DEVICE, MCY_V(cudaErrorInvalidDevice, hipErrorInvalidDevice))
MCY_SAME(MCY_ERROR_NOT_READY, MCY_V(cudaErrorNotReady, hipErrorNotReady))
MCY_SAME(MCY_ERROR_PEER_ACCESS_ALREADY_ENABLED, MCY_V(cudaErrorPeerAccessAlreadyEnabled, hipErrorPeerAccessAlreadyEnabled))
MCY_SAME(MCY_MEMCPY_HOST_TO_HOST, MCY_V(cudaMemcpyHostToHost, hipMemcpyHostToHost))
MCY_SAME(MCY_MEMCPY_HOST_TO_DEVICE, MCY_V(cudaMemcpyHostToDevice, hipMemcpyHostToDevice))
MCY_SAME(MCY_MEMCPY_DEVICE_TO_HOST, MCY_V(cudaMemcpyDeviceToHost, hipMemcpyDeviceToHost))
MCY_SAME(MCY_MEMCPY_DEVICE_TO_DEVICE, MCY_V(cudaMemcpyDeviceToDevice, hipMemcpyDeviceToDevice))
MCY_SAME(MCY_MEMCPY_DEFAULT, MCY_V(cudaMemcpyDefault, hipMemcpyDefault))
MCY_SAME(MCY_STREAM_DEFAULT, MCY_V(cudaStreamDefault, hipStreamDefault))
MCY_SAME(MCY_STREAM_NON_BLOCKING, MCY_V(cudaStreamNonBlocking, hipStreamNonBlocking))
MCY_SAME(MCY_EVENT_DEFAULT, MCY_V(cudaEventDefault, hipEventDefault))
MCY_SAME(MCY_EVENT_BLOCKING_SYNC, MCY_V(cudaEventBlockingSync, hipEventBlockingSync))
MCY_SAME(MCY_EVENT_DISABLE_TIMING, MCY_V(cudaEventDisableTiming, hipEventDisableTiming))
MCY_SAME(MCY_EVENT_INTERPROCESS, MCY_V(cudaEventInterprocess, hipEventInterprocess))
MCY_SAME(MCY_HOST_ALLOC_DEFAULT, MCY_V(cudaHostAllocDefault, hipHostMallocDefault))
MCY_SAME(MCY_HOST_ALLOC_PORTABLE, MCY_V(cudaHostAllocPortable, hipHostMallocPortable))
MCY_SAME(MCY_HOST_ALLOC_MAPPED, MCY_V(cudaHostAllocMapped, hipHostMallocMapped))
MCY_SAME(MCY_HOST_REGISTER_DEFAULT, MCY_V(cudaHostRegisterDefault, hipHostRegisterDefault))
MCY_SAME(MCY_HOST_REGISTER_PORTABLE, MCY_V(cudaHostRegisterPortable, hipHostRegisterPortable))
MCY_SAME(MCY_HOST_REGISTER_MAPPED, MCY_V(cudaHostRegisterMapped, hipHostRegisterMapped))
_Static_assert(sizeof(cudaIpcMemHandle_t) == MCY_IPC_HANDLE_SIZE, "IPC memory handle is not 64 bytes");
_Static_assert(sizeof(cudaError_t) == sizeof(int), "status codes are not int-sized");
_Static_assert(sizeof(mcy_device_attr_t) == sizeof(int), "device attribute enum is not int-sized");
_Static_assert(sizeof(mcy_memcpy_kind_t) == sizeof(int), "memcpy kind enum is not int-sized");
_Static_assert(sizeof(cudaStream_t) == sizeof(void *), "stream handle is not a pointer");
_Static_assert(sizeof(cudaEvent_t) == sizeof(void *), "event handle is not a pointer");
#undef MCY_SAME
#undef MCY_V
#endif

#endif /* MCY_CUDA_NAMES_H */
