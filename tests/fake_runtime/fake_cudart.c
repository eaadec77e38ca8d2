/*
 * fake_cudart.c -- a TEST-ONLY stand-in for libcudart (CUDA 13), backed by host memory.
 *
 * It lets CI machines without a GPU drive monarch_cy's GPU shim through its error
 * and lifetime paths for real.  It never replaces the GPU run: it models no
 * kernels and no asynchrony, only bytes, handles and status codes.
 *
 * Exports every cuda* function the shim binds (the X-macro list in
 * monarch_cy/include/mcy_cuda_names.h) with CUDA's prototypes; build with
 * -DFAKE_WITH_CUDA_HEADERS -I<cuda>/include to have the compiler check them.
 *
 *   - FAKE_CUDART_DEVICES devices (default 1, at most 16).  With 0, every call
 *     that needs a device returns cudaErrorNoDevice (100).  The current device is
 *     per thread, as in CUDA; bad ordinals give cudaErrorInvalidDevice (101).
 *   - Device memory: one memfd per cudaMalloc, mapped shared, so that another
 *     process can really map it from an IPC handle.  FAKE_CUDART_MEM_LIMIT (bytes)
 *     caps the total in use; beyond it cudaMalloc returns 2.
 *   - Allocations, registrations, IPC mappings, streams and events are tracked:
 *     freeing or using an unknown one fails (1, 713, 400 as CUDA does) and the
 *     fake_live_*() counters let tests prove that nothing leaks.
 *   - Copies and memsets move real bytes.  The device side of a copy (by its
 *     kind) must lie in tracked memory (device, IPC-mapped, pinned or registered);
 *     a side that starts in tracked memory must fit inside that allocation.
 *   - IPC handle: magic "FAKECUDA", owner pid, memfd number, serial, size, base,
 *     device.  Opening it in the owning process gives 201 ("invalid device
 *     context"); a wrong magic, or an allocation that is gone, gives 400.  Each
 *     open maps anew (no reference counting, unlike CUDA).
 *   - Last error, per thread: set by every failing call; cudaGetLastError
 *     returns and clears it, cudaPeekAtLastError only returns it.
 *   - FAKE_CUDART_FAIL=Name:status[:times] makes cudaName return `status` on its
 *     next `times` calls (default 1; -1: always); fake_fail() does the same at run
 *     time.  Driver functions: Name without "cu" (and without "_v2").
 *     GetLastError, PeekAtLastError and GetError* are never failed.
 *   - Also the driver-level extras the shim binds from libcuda (cuInit,
 *     cuMemGetAddressRange_v2, cuMemGetHandleForAddressRange, cuGetErrorName):
 *     make "libcuda.so.1" on the loader's path a symlink to this file and the
 *     same loaded copy serves both.  A dma-buf fd is a dup of the allocation's
 *     memfd, so only whole-allocation ranges (from its base) are supported.
 *   - FAKE_CUDART_SLEEP_MS: each *Synchronize call sleeps that long (GIL tests).
 *     FAKE_CUDART_VERSION: the runtime version reported (default 13000).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifdef FAKE_WITH_CUDA_HEADERS
#include <stddef.h>
#include <cuda_runtime_api.h>
#include <cuda.h>
typedef enum cudaDeviceAttr fake_attr_t;
typedef enum cudaMemcpyKind fake_kind_t;
_Static_assert(sizeof(struct cudaDeviceProp) == 1008, "cudaDeviceProp size");
_Static_assert(offsetof(struct cudaDeviceProp, totalGlobalMem) == 288, "totalGlobalMem");
_Static_assert(offsetof(struct cudaPointerAttributes, device) == 4, "device");
_Static_assert(offsetof(struct cudaPointerAttributes, devicePointer) == 8, "devicePointer");
_Static_assert(offsetof(struct cudaPointerAttributes, hostPointer) == 16, "hostPointer");
#else
typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct cudaIpcMemHandle_st { char reserved[64]; } cudaIpcMemHandle_t;
struct cudaDeviceProp;
struct cudaPointerAttributes;
typedef int fake_attr_t;
typedef int fake_kind_t;
typedef int CUresult;                    /* driver API (libcuda) types */
typedef unsigned long long CUdeviceptr;
typedef int CUmemRangeHandleType;
#endif

/* Status codes returned, with names and texts exactly as libcudart 13 reports them. */
enum { FK_OK = 0, FK_VALUE = 1, FK_ALLOC = 2, FK_DIRECTION = 21, FK_NODEV = 100, FK_DEVICE = 101,
       FK_CONTEXT = 201, FK_HANDLE = 400, FK_PEER_ON = 704, FK_REGISTERED = 712, FK_NOT_REGISTERED = 713 };
static const struct { int code; const char *name, *text; } errors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {201, "cudaErrorDeviceUninitialized", "invalid device context"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {600, "cudaErrorNotReady", "device not ready"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {712, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {713, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {999, "cudaErrorUnknown", "unknown error"},
};

/* ------------------------------------------------------------------ state */

enum { K_DEV = 1, K_HOST = 2, K_REG = 4, K_IPC = 8, K_STREAM = 16, K_EVENT = 32 };
#define K_MEM (K_DEV | K_HOST | K_REG | K_IPC)
#define MAX_DEV 16

struct rec {                /* one tracked object; a stream or event handle is its rec */
    struct rec *next;
    int kind, dev, fd;      /* fd: the memfd behind a device allocation, else -1 */
    unsigned flags;
    unsigned long serial;   /* device allocations: names the memfd */
    char *base;
    size_t size;
    int recorded;           /* events: recorded at least once, last at t_ms */
    double t_ms;
};

struct ipc_wire {           /* the 64 bytes of a cudaIpcMemHandle_t */
    char magic[8];
    int32_t pid, fd;
    uint64_t serial, size, base;
    int32_t dev;
    char pad[20];
};
_Static_assert(sizeof(struct ipc_wire) == 64, "IPC handle is 64 bytes");

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards the statics below */
static struct rec *recs;
static int ndev = 1, version = 13000;
static size_t mem_limit, mem_used;
static long sleep_ms;
static unsigned long next_serial;
static unsigned char peer_on[MAX_DEV][MAX_DEV];
static char fail_name[64];
static int fail_status, fail_times;
static __thread int cur_dev;            /* per thread, as in CUDA */
static __thread cudaError_t last_error;

/* Test hook: make cuda<name> return `status` on its next `times` calls (-1: always). */
void fake_fail(const char *name, int status, int times) {
    if (strncmp(name, "cu", 2) == 0) name += strncmp(name, "cuda", 4) == 0 ? 4 : 2;
    pthread_mutex_lock(&mu);
    snprintf(fail_name, sizeof fail_name, "%s", name);
    fail_status = status;
    fail_times = times;
    pthread_mutex_unlock(&mu);
}

__attribute__((constructor)) static void fake_init(void) {
    const char *s;
    if ((s = getenv("FAKE_CUDART_DEVICES"))) ndev = atoi(s) < 0 ? 0 : atoi(s) > MAX_DEV ? MAX_DEV : atoi(s);
    if ((s = getenv("FAKE_CUDART_MEM_LIMIT"))) mem_limit = strtoull(s, NULL, 0);
    if ((s = getenv("FAKE_CUDART_VERSION"))) version = atoi(s);
    if ((s = getenv("FAKE_CUDART_SLEEP_MS"))) sleep_ms = atol(s);
    char name[64];
    int st = 0, times = 1;
    if ((s = getenv("FAKE_CUDART_FAIL")) && sscanf(s, "%63[^:]:%d:%d", name, &st, &times) >= 2)
        fake_fail(name, st, times);
}

static cudaError_t ret(int st) { if (st) last_error = st; return st; }

static int injected(const char *fn) { /* fn: __func__, "cudaMalloc" or "cuMemGetAddressRange_v2" */
    int st = 0;
    fn += strncmp(fn, "cuda", 4) == 0 ? 4 : 2;
    size_t n = strlen(fail_name);
    pthread_mutex_lock(&mu);
    if (fail_times != 0 && strncmp(fn, fail_name, n) == 0 && (!fn[n] || !strcmp(fn + n, "_v2"))) {
        st = fail_status;
        if (fail_times > 0) fail_times--;
    }
    pthread_mutex_unlock(&mu);
    return st;
}
/* Every cuda* entry point starts with ENTER() (no device needed) or ENTER_DEV(). */
#define ENTER() do { int inj_ = injected(__func__); if (inj_) return ret(inj_); } while (0)
#define ENTER_DEV() do { ENTER(); if (ndev == 0) return ret(FK_NODEV); } while (0)
#define BAD_DEV(d) ((d) < 0 || (d) >= ndev)
#define OUT(p, v) do { if (!(p)) return ret(FK_VALUE); *(p) = (v); return FK_OK; } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void nap(void) {
    struct timespec t = { sleep_ms / 1000, (sleep_ms % 1000) * 1000000L };
    if (sleep_ms > 0) nanosleep(&t, NULL);
}

/* mu held.  exact: the record whose base is p; else the memory record holding [p, p+n). */
static struct rec *find(int kinds, const void *p, size_t n, int exact) {
    const char *c = p;
    for (struct rec *r = recs; r && c; r = r->next)
        if ((r->kind & kinds) &&
            (exact ? c == r->base
                   : c >= r->base && c < r->base + r->size && n <= r->size - (size_t)(c - r->base)))
            return r;
    return NULL;
}

static struct rec *add(int kind, void *base, size_t size, int fd, unsigned flags) {
    struct rec *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->kind = kind; r->base = base ? base : (char *)r; r->size = size;
    r->fd = fd; r->flags = flags; r->dev = cur_dev;
    pthread_mutex_lock(&mu);
    r->next = recs; recs = r;
    pthread_mutex_unlock(&mu);
    return r;
}

/* Forget the object of `kind` whose base (or handle) is p and free what backs it;
 * `missing` is the status when there is none. */
static cudaError_t release(int kind, const void *p, int missing) {
    pthread_mutex_lock(&mu);
    struct rec *r = find(kind, p, 0, 1);
    for (struct rec **pp = &recs; r && *pp; pp = &(*pp)->next)
        if (*pp == r) { *pp = r->next; break; }
    if (r && kind == K_DEV) mem_used -= r->size;
    pthread_mutex_unlock(&mu);
    if (!r) return ret(missing);
    if (kind == K_DEV || kind == K_IPC) munmap(r->base, r->size);
    if (r->fd >= 0) close(r->fd);
    if (kind == K_HOST) free(r->base);
    free(r);
    return FK_OK;
}

static int known(int kinds, const void *p) {
    pthread_mutex_lock(&mu);
    int ok = find(kinds, p, 0, 1) != NULL;
    pthread_mutex_unlock(&mu);
    return ok;
}

/* 0 (legacy default), cudaStreamLegacy (1), cudaStreamPerThread (2), or one of ours. */
static int stream_ok(cudaStream_t s) { return (uintptr_t)s <= 2 || known(K_STREAM, s); }

static int count(int kind) {
    int n = 0;
    pthread_mutex_lock(&mu);
    for (struct rec *r = recs; r; r = r->next) n += r->kind == kind;
    pthread_mutex_unlock(&mu);
    return n;
}
/* Counters for lifetime tests: live objects of each kind in this process. */
int fake_live_allocations(void) { return count(K_DEV); }
int fake_live_host_allocations(void) { return count(K_HOST); }
int fake_live_registrations(void) { return count(K_REG); }
int fake_live_ipc_mappings(void) { return count(K_IPC); }
int fake_live_streams(void) { return count(K_STREAM); }
int fake_live_events(void) { return count(K_EVENT); }

/* ---------------------------------------------------------------- devices */

cudaError_t cudaGetDeviceCount(int *count) {
    ENTER();
    if (!count) return ret(FK_VALUE);
    *count = ndev;
    return ndev ? FK_OK : ret(FK_NODEV);
}
cudaError_t cudaGetDevice(int *device) { ENTER_DEV(); OUT(device, cur_dev); }
cudaError_t cudaSetDevice(int device) {
    ENTER_DEV();
    if (BAD_DEV(device)) return ret(FK_DEVICE);
    cur_dev = device;
    return FK_OK;
}
cudaError_t cudaDeviceSynchronize(void) { ENTER_DEV(); nap(); return FK_OK; }

static size_t total_mem(void) { return mem_limit ? mem_limit : (size_t)16 << 30; }
static int pci_bus(int device) { return 0x18 + 0x10 * device; }

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    ENTER_DEV();
    if (!prop) return ret(FK_VALUE);
    if (BAD_DEV(device)) return ret(FK_DEVICE);
    size_t total = total_mem();
    memset(prop, 0, 1008);                                        /* CUDA 13's size */
    snprintf((char *)prop, 256, "Fake CUDA Device %d", device);   /* name, at 0 */
    memcpy((char *)prop + 288, &total, sizeof total);             /* totalGlobalMem */
    return FK_OK;
}
cudaError_t cudaDeviceGetAttribute(int *value, fake_attr_t attr, int device) {
    ENTER_DEV();
    if (BAD_DEV(device)) return ret(FK_DEVICE);
    switch ((int)attr) {  /* CUDA 13 numbers, as in monarch_cy._platform_tables.CUDA13 */
    case 75: OUT(value, 9);                /* ComputeCapabilityMajor */
    case 76: OUT(value, 0);                /* ComputeCapabilityMinor */
    case 16: OUT(value, 132);              /* MultiProcessorCount */
    case 33: OUT(value, pci_bus(device));  /* PciBusId */
    case 34: case 50: OUT(value, 0);       /* PciDeviceId, PciDomainId */
    default: return ret(FK_VALUE);
    }
}
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
    ENTER_DEV();
    if (BAD_DEV(device)) return ret(FK_DEVICE);
    if (!pciBusId || len < 13) return ret(FK_VALUE);
    snprintf(pciBusId, len, "0000:%02x:00.0", pci_bus(device));
    return FK_OK;
}
cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice) {
    ENTER_DEV();
    if (BAD_DEV(device) || BAD_DEV(peerDevice)) return ret(FK_DEVICE);
    OUT(canAccessPeer, device != peerDevice);
}
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
    ENTER_DEV();
    if (flags) return ret(FK_VALUE);
    if (BAD_DEV(peerDevice) || peerDevice == cur_dev) return ret(FK_DEVICE);
    pthread_mutex_lock(&mu);
    int was = peer_on[cur_dev][peerDevice];
    peer_on[cur_dev][peerDevice] = 1;
    pthread_mutex_unlock(&mu);
    return was ? ret(FK_PEER_ON) : FK_OK;
}
cudaError_t cudaRuntimeGetVersion(int *runtimeVersion) { ENTER(); OUT(runtimeVersion, version); }
cudaError_t cudaDriverGetVersion(int *driverVersion) { ENTER(); OUT(driverVersion, 13000); }
cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
    ENTER_DEV();
    if (!free || !total) return ret(FK_VALUE);
    pthread_mutex_lock(&mu);
    *total = total_mem();
    *free = mem_used < *total ? *total - mem_used : 0;
    pthread_mutex_unlock(&mu);
    return FK_OK;
}

/* ----------------------------------------------------------------- memory */

cudaError_t cudaMalloc(void **devPtr, size_t size) {
    ENTER_DEV();
    if (!devPtr) return ret(FK_VALUE);
    *devPtr = NULL;
    if (size == 0) return FK_OK;
    pthread_mutex_lock(&mu);
    int over = mem_limit && size > mem_limit - mem_used;
    unsigned long serial = ++next_serial;
    if (!over) mem_used += size;  /* reserved now; given back below on failure */
    pthread_mutex_unlock(&mu);
    if (over) return ret(FK_ALLOC);
    char name[40];
    snprintf(name, sizeof name, "fake_cudart_%lu", serial);
    int fd = memfd_create(name, MFD_CLOEXEC);
    void *m = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)size) == 0)
        m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    struct rec *r = m == MAP_FAILED ? NULL : add(K_DEV, m, size, fd, 0);
    if (!r) {
        if (m != MAP_FAILED) munmap(m, size);
        if (fd >= 0) close(fd);
        pthread_mutex_lock(&mu); mem_used -= size; pthread_mutex_unlock(&mu);
        return ret(FK_ALLOC);
    }
    r->serial = serial;
    *devPtr = m;
    return FK_OK;
}
cudaError_t cudaFree(void *devPtr) { ENTER_DEV(); return devPtr ? release(K_DEV, devPtr, FK_VALUE) : FK_OK; }
cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
    ENTER_DEV();
    if (!pHost || flags > 15) return ret(FK_VALUE);
    *pHost = NULL;
    if (size == 0) return FK_OK;
    void *p = malloc(size);
    if (!p || !add(K_HOST, p, size, -1, flags)) { free(p); return ret(FK_ALLOC); }
    *pHost = p;
    return FK_OK;
}
cudaError_t cudaFreeHost(void *ptr) { ENTER_DEV(); return ptr ? release(K_HOST, ptr, FK_VALUE) : FK_OK; }
cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
    ENTER_DEV();
    if (!ptr || !size || flags > 15) return ret(FK_VALUE);
    char *p = ptr;
    int overlap = 0;
    pthread_mutex_lock(&mu);
    for (struct rec *r = recs; r; r = r->next)
        overlap |= (r->kind & (K_HOST | K_REG)) && p < r->base + r->size && r->base < p + size;
    pthread_mutex_unlock(&mu);
    if (overlap) return ret(FK_REGISTERED);
    return add(K_REG, ptr, size, -1, flags) ? FK_OK : ret(FK_ALLOC);
}
cudaError_t cudaHostUnregister(void *ptr) { ENTER_DEV(); return release(K_REG, ptr, FK_NOT_REGISTERED); }

/* 0 if [p, p+n) may take part in a copy: in tracked memory when must_track, and
 * inside its allocation whenever it starts in tracked memory; else 1. */
static int side_bad(const void *p, size_t n, int must_track) {
    pthread_mutex_lock(&mu);
    struct rec *holder = find(K_MEM, p, 0, 0), *fits = find(K_MEM, p, n, 0);
    pthread_mutex_unlock(&mu);
    return must_track ? !fits : holder && !fits;
}
static cudaError_t copy(void *dst, const void *src, size_t n, int kind) {
    if (kind < 0 || kind > 4) return ret(FK_DIRECTION);
    if (n == 0) return FK_OK;
    if (!dst || !src || side_bad(dst, n, kind == 1 || kind == 3) ||
        side_bad(src, n, kind == 2 || kind == 3))
        return ret(FK_VALUE);
    memmove(dst, src, n);
    return FK_OK;
}
static cudaError_t fill(void *p, int value, size_t n) {
    if (n == 0) return FK_OK;
    if (side_bad(p, n, 1)) return ret(FK_VALUE);
    memset(p, value, n);
    return FK_OK;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, fake_kind_t kind) {
    ENTER_DEV(); return copy(dst, src, count, (int)kind);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, fake_kind_t kind,
                            cudaStream_t stream) {
    ENTER_DEV();
    return stream_ok(stream) ? copy(dst, src, count, (int)kind) : ret(FK_HANDLE);
}
cudaError_t cudaMemset(void *devPtr, int value, size_t count) { ENTER_DEV(); return fill(devPtr, value, count); }
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    ENTER_DEV();
    return stream_ok(stream) ? fill(devPtr, value, count) : ret(FK_HANDLE);
}

/* ---------------------------------------------------------- streams, events */

static cudaError_t create(void **out, int kind, unsigned flags) {
    struct rec *r = add(kind, NULL, 0, -1, flags);
    if (!r) return ret(FK_ALLOC);
    *out = r;
    return FK_OK;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    ENTER_DEV();
    if (!pStream || flags > 1) return ret(FK_VALUE);
    return create((void **)pStream, K_STREAM, flags);
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) { ENTER_DEV(); return release(K_STREAM, stream, FK_HANDLE); }
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    ENTER_DEV();
    if (!stream_ok(stream)) return ret(FK_HANDLE);
    nap();
    return FK_OK;
}
cudaError_t cudaStreamQuery(cudaStream_t stream) { ENTER_DEV(); return stream_ok(stream) ? FK_OK : ret(FK_HANDLE); }
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    ENTER_DEV();
    if (!stream_ok(stream) || !known(K_EVENT, event)) return ret(FK_HANDLE);
    return flags > 1 ? ret(FK_VALUE) : FK_OK;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    ENTER_DEV();
    /* As CUDA: known flags only, and Interprocess (4) requires DisableTiming (2). */
    if (!event || flags > 7 || ((flags & 4) && !(flags & 2))) return ret(FK_VALUE);
    return create((void **)event, K_EVENT, flags);
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    ENTER_DEV();
    if (!stream_ok(stream)) return ret(FK_HANDLE);
    double t = now_ms();
    pthread_mutex_lock(&mu);
    struct rec *r = find(K_EVENT, event, 0, 1);
    if (r) { r->recorded = 1; r->t_ms = t; }
    pthread_mutex_unlock(&mu);
    return r ? FK_OK : ret(FK_HANDLE);
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    ENTER_DEV();
    if (!known(K_EVENT, event)) return ret(FK_HANDLE);
    nap();
    return FK_OK;
}
cudaError_t cudaEventQuery(cudaEvent_t event) { ENTER_DEV(); return known(K_EVENT, event) ? FK_OK : ret(FK_HANDLE); }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    ENTER_DEV();
    if (!ms) return ret(FK_VALUE);
    pthread_mutex_lock(&mu);
    struct rec *a = find(K_EVENT, start, 0, 1), *b = find(K_EVENT, end, 0, 1);
    /* As CUDA: unknown, never-recorded or DisableTiming events give 400. */
    int ok = a && b && a->recorded && b->recorded && !((a->flags | b->flags) & 2);
    if (ok) *ms = (float)(b->t_ms - a->t_ms);
    pthread_mutex_unlock(&mu);
    return ok ? FK_OK : ret(FK_HANDLE);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) { ENTER_DEV(); return release(K_EVENT, event, FK_HANDLE); }

/* -------------------------------------------------------------------- IPC */

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
    ENTER_DEV();
    if (!handle) return ret(FK_VALUE);
    struct ipc_wire w;
    memset(&w, 0, sizeof w);
    pthread_mutex_lock(&mu);
    struct rec *r = find(K_DEV, devPtr, 0, 0);  /* any address inside: the whole allocation */
    if (r) {
        memcpy(w.magic, "FAKECUDA", 8);
        w.pid = getpid(); w.fd = r->fd; w.serial = r->serial; w.size = r->size;
        w.base = (uintptr_t)r->base; w.dev = r->dev;
    }
    pthread_mutex_unlock(&mu);
    if (!r) return ret(FK_VALUE);
    memcpy(handle, &w, sizeof w);
    return FK_OK;
}
cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
    ENTER_DEV();
    if (!devPtr || (flags & ~1u)) return ret(FK_VALUE);
    struct ipc_wire w;
    memcpy(&w, &handle, sizeof w);
    if (memcmp(w.magic, "FAKECUDA", 8) != 0 || w.size == 0) return ret(FK_HANDLE);
    if (w.pid == getpid()) return ret(FK_CONTEXT);
    /* The owner's memfd, checked by name so that a reused fd number is refused. */
    char path[64], link[128] = {0}, want[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)w.pid, (int)w.fd);
    snprintf(want, sizeof want, "/memfd:fake_cudart_%llu ", (unsigned long long)w.serial);
    if (readlink(path, link, sizeof link - 1) < 0 || strncmp(link, want, strlen(want)) != 0)
        return ret(FK_HANDLE);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    void *m = fd < 0 ? MAP_FAILED : mmap(NULL, w.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
    if (m == MAP_FAILED) return ret(FK_HANDLE);
    struct rec *r = add(K_IPC, m, w.size, -1, 0);
    if (!r) { munmap(m, w.size); return ret(FK_ALLOC); }
    r->dev = w.dev;
    *devPtr = m;
    return FK_OK;
}
cudaError_t cudaIpcCloseMemHandle(void *devPtr) { ENTER_DEV(); return release(K_IPC, devPtr, FK_VALUE); }

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr) {
    ENTER_DEV();
    if (!attributes) return ret(FK_VALUE);
    pthread_mutex_lock(&mu);
    struct rec *r = find(K_MEM, ptr, 0, 0);
    /* CUDA 13 layout: type (0 unregistered, 1 host, 2 device) at 0, device at 4,
     * devicePointer at 8, hostPointer at 16.  Unknown memory: type 0, device -2. */
    int type = !r ? 0 : (r->kind & (K_DEV | K_IPC)) ? 2 : 1, dev = r ? r->dev : -2;
    pthread_mutex_unlock(&mu);
    const void *dptr = r ? ptr : NULL, *hptr = type == 1 ? ptr : NULL;
    char *a = (char *)attributes;
    memcpy(a, &type, 4); memcpy(a + 4, &dev, 4);
    memcpy(a + 8, &dptr, 8); memcpy(a + 16, &hptr, 8);
    return FK_OK;
}

/* ----------------------------------------------------------------- errors */

cudaError_t cudaGetLastError(void) { cudaError_t st = last_error; last_error = FK_OK; return st; }
cudaError_t cudaPeekAtLastError(void) { return last_error; }
static int error_index(int code) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) return (int)i;
    return -1;
}
const char *cudaGetErrorName(cudaError_t error) {
    int i = error_index((int)error);
    return i < 0 ? "unrecognized error code" : errors[i].name;
}
const char *cudaGetErrorString(cudaError_t error) {
    int i = error_index((int)error);
    return i < 0 ? "unrecognized error code" : errors[i].text;
}

/* ------------------------------------------- driver-level extras (libcuda names) */

/* Driver calls return CUresult and, as in CUDA, leave the runtime's last error alone. */
#define DRV_ENTER() do { int inj_ = injected(__func__); if (inj_) return inj_; \
                         if (ndev == 0) return FK_NODEV; } while (0)
#define CU_NOT_FOUND 500
#define CU_NOT_SUPPORTED 801

CUresult cuInit(unsigned int Flags) { DRV_ENTER(); return Flags ? FK_VALUE : FK_OK; }
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    DRV_ENTER();
    pthread_mutex_lock(&mu);
    struct rec *r = find(K_DEV | K_IPC, (void *)(uintptr_t)dptr, 0, 0);
    if (r && pbase) *pbase = (uintptr_t)r->base;
    if (r && psize) *psize = r->size;
    pthread_mutex_unlock(&mu);
    return r ? FK_OK : CU_NOT_FOUND;
}
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                       CUmemRangeHandleType handleType, unsigned long long flags) {
    DRV_ENTER();
    long page = sysconf(_SC_PAGESIZE);
    if (!handle || (int)handleType != 1 || flags || !size || (dptr | size) % page) return FK_VALUE;
    pthread_mutex_lock(&mu);
    struct rec *r = find(K_DEV, (void *)(uintptr_t)dptr, size, 0);
    int fd = r && r->base == (char *)(uintptr_t)dptr ? dup(r->fd) : -1;
    pthread_mutex_unlock(&mu);
    if (!r) return FK_VALUE;
    if (fd < 0) return CU_NOT_SUPPORTED;  /* the fake: only ranges from an allocation's base */
    *(int *)handle = fd;
    return FK_OK;
}
CUresult cuGetErrorName(CUresult error, const char **pStr) {
    static const struct { int code; const char *name; } names[] = {
        {0, "CUDA_SUCCESS"}, {1, "CUDA_ERROR_INVALID_VALUE"}, {2, "CUDA_ERROR_OUT_OF_MEMORY"},
        {3, "CUDA_ERROR_NOT_INITIALIZED"}, {100, "CUDA_ERROR_NO_DEVICE"}, {500, "CUDA_ERROR_NOT_FOUND"},
        {801, "CUDA_ERROR_NOT_SUPPORTED"}, {999, "CUDA_ERROR_UNKNOWN"},
    };
    if (!pStr) return FK_VALUE;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == (int)error) { *pStr = names[i].name; return FK_OK; }
    *pStr = NULL;  /* as CUDA: unknown code -> CUDA_ERROR_INVALID_VALUE, no string */
    return FK_VALUE;
}
