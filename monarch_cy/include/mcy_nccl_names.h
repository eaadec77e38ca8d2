/*
 * mcy_nccl_names.h -- NCCL and RCCL under their shared nccl* names.
 *
 * NCCL (libnccl.so.2) and RCCL (librccl.so.1) export the same nccl* symbols
 * with the same enum values and the same 128-byte unique id; only the library
 * differs.  The library is opened at run time (monarch_cy/_collectives/
 * _nccl_loader.py) and each symbol's address is stored in `mcy_nccl` under the
 * name without its "nccl" prefix.  Nothing here links against either library.
 *
 * Two ways to compile this header:
 *
 *   default            no vendor header needed: communicators and streams are
 *                      opaque pointers, results/types/ops are 32-bit ints, the
 *                      unique id is 128 opaque bytes, and the config struct is
 *                      the 2.14 prefix every later version accepts (NCCL reads
 *                      `size` bytes of it and defaults the rest).
 *   MCY_VENDOR_NCCL    include the real <nccl.h> (which needs the CUDA or HIP
 *                      runtime headers on the include path): each function
 *                      pointer type below must equal the real prototype, each
 *                      MCY_NCCL_* value the real enum value, and the config
 *                      prefix the real struct's leading fields.  A mismatch is
 *                      a compile error.
 *
 * The X-macro columns: X(name without "nccl", required?, return, parameters).
 * Optional functions (CommInitRankConfig from 2.14, CommSplit from 2.18) may
 * be missing from an older library; their slot is then NULL and the Python
 * tier reports which version would have them.
 */
#ifndef MCY_NCCL_NAMES_H
#define MCY_NCCL_NAMES_H

#include <stddef.h>

#if defined(MCY_VENDOR_NCCL)
#include <nccl.h>
typedef cudaStream_t mcy_nccl_stream_t;
#else
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct ncclConfig_v21400 ncclConfig_t;
typedef struct CUstream_st *mcy_nccl_stream_t;
#endif

/* The leading fields of ncclConfig_t as of NCCL 2.14 (RCCL keeps them). */
typedef struct mcy_nccl_config {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
} mcy_nccl_config;

#define MCY_NCCL_UNIQUE_ID_BYTES 128
#define MCY_NCCL_API_MAGIC 0xcafebeef
#define MCY_NCCL_CONFIG_VERSION 21400
#define MCY_NCCL_SPLIT_NOCOLOR (-1)

/* Results */
#define MCY_NCCL_SUCCESS 0
#define MCY_NCCL_UNHANDLED_CUDA_ERROR 1
#define MCY_NCCL_SYSTEM_ERROR 2
#define MCY_NCCL_INTERNAL_ERROR 3
#define MCY_NCCL_INVALID_ARGUMENT 4
#define MCY_NCCL_INVALID_USAGE 5
#define MCY_NCCL_REMOTE_ERROR 6
#define MCY_NCCL_IN_PROGRESS 7
#define MCY_NCCL_TIMEOUT 8
/* Reduction operations */
#define MCY_NCCL_SUM 0
#define MCY_NCCL_PROD 1
#define MCY_NCCL_MAX 2
#define MCY_NCCL_MIN 3
#define MCY_NCCL_AVG 4
/* Data types */
#define MCY_NCCL_INT8 0
#define MCY_NCCL_UINT8 1
#define MCY_NCCL_INT32 2
#define MCY_NCCL_UINT32 3
#define MCY_NCCL_INT64 4
#define MCY_NCCL_UINT64 5
#define MCY_NCCL_FLOAT16 6
#define MCY_NCCL_FLOAT32 7
#define MCY_NCCL_FLOAT64 8
#define MCY_NCCL_BFLOAT16 9
#define MCY_NCCL_FLOAT8E4M3 10
#define MCY_NCCL_FLOAT8E5M2 11

#define MCY_NCCL_FUNCTIONS(X) \
    X(GetVersion, 1, ncclResult_t, (int *version)) \
    X(GetUniqueId, 1, ncclResult_t, (ncclUniqueId *uniqueId)) \
    X(CommInitRank, 1, ncclResult_t, (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)) \
    X(CommInitRankConfig, 0, ncclResult_t, (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)) \
    X(CommDestroy, 1, ncclResult_t, (ncclComm_t comm)) \
    X(CommAbort, 1, ncclResult_t, (ncclComm_t comm)) \
    X(CommGetAsyncError, 1, ncclResult_t, (ncclComm_t comm, ncclResult_t *asyncError)) \
    X(CommCount, 1, ncclResult_t, (const ncclComm_t comm, int *count)) \
    X(CommCuDevice, 1, ncclResult_t, (const ncclComm_t comm, int *device)) \
    X(CommUserRank, 1, ncclResult_t, (const ncclComm_t comm, int *rank)) \
    X(CommSplit, 0, ncclResult_t, (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)) \
    X(GetErrorString, 1, const char *, (ncclResult_t result)) \
    X(GetLastError, 1, const char *, (ncclComm_t comm)) \
    X(AllReduce, 1, ncclResult_t, (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, mcy_nccl_stream_t stream)) \
    X(Broadcast, 1, ncclResult_t, (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, mcy_nccl_stream_t stream)) \
    X(Reduce, 1, ncclResult_t, (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, mcy_nccl_stream_t stream)) \
    X(AllGather, 1, ncclResult_t, (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, mcy_nccl_stream_t stream)) \
    X(ReduceScatter, 1, ncclResult_t, (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, mcy_nccl_stream_t stream)) \
    X(Send, 1, ncclResult_t, (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, mcy_nccl_stream_t stream)) \
    X(Recv, 1, ncclResult_t, (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, mcy_nccl_stream_t stream)) \
    X(GroupStart, 1, ncclResult_t, (void)) \
    X(GroupEnd, 1, ncclResult_t, (void))

/* One function-pointer type per function: mcy_nccl_<Name>_t. */
#define MCY_NCCL_DECLARE_TYPE(name, req, ret, params) typedef ret (*mcy_nccl_##name##_t) params;
MCY_NCCL_FUNCTIONS(MCY_NCCL_DECLARE_TYPE)
#undef MCY_NCCL_DECLARE_TYPE

#define MCY_NCCL_DECLARE_FIELD(name, req, ret, params) mcy_nccl_##name##_t name;
typedef struct mcy_nccl_fns { MCY_NCCL_FUNCTIONS(MCY_NCCL_DECLARE_FIELD) } mcy_nccl_fns;
#undef MCY_NCCL_DECLARE_FIELD

#define MCY_NCCL_COUNT_ONE(name, req, ret, params) +1
enum { MCY_NCCL_NFUNCS = 0 MCY_NCCL_FUNCTIONS(MCY_NCCL_COUNT_ONE) };
#undef MCY_NCCL_COUNT_ONE

typedef union mcy_nccl_table {
    mcy_nccl_fns fn;
    void *slot[MCY_NCCL_NFUNCS];
} mcy_nccl_table;

#define MCY_NCCL_NAME(name, req, ret, params) "nccl" #name,
#define MCY_NCCL_REQUIRED(name, req, ret, params) req,
static const char *const mcy_nccl_names[MCY_NCCL_NFUNCS] = { MCY_NCCL_FUNCTIONS(MCY_NCCL_NAME) };
static const int mcy_nccl_required[MCY_NCCL_NFUNCS] = { MCY_NCCL_FUNCTIONS(MCY_NCCL_REQUIRED) };
#undef MCY_NCCL_NAME
#undef MCY_NCCL_REQUIRED

/* The process's one table; bound by monarch_cy._nccl_shim.bind(). */
static mcy_nccl_table mcy_nccl __attribute__((unused));

#if defined(MCY_VENDOR_NCCL)
/* Each pointer type must be exactly the real function's type (no symbol is referenced). */
#define MCY_NCCL_CHECK_PROTO(name, req, ret, params) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&nccl##name), mcy_nccl_##name##_t), \
                   "prototype of nccl" #name " differs from mcy_nccl_" #name "_t");
MCY_NCCL_FUNCTIONS(MCY_NCCL_CHECK_PROTO)
#undef MCY_NCCL_CHECK_PROTO

#define MCY_NCCL_SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " differs from the vendor's " #b);
MCY_NCCL_SAME(MCY_NCCL_UNIQUE_ID_BYTES, NCCL_UNIQUE_ID_BYTES)
MCY_NCCL_SAME(MCY_NCCL_UNIQUE_ID_BYTES, sizeof(ncclUniqueId))
MCY_NCCL_SAME(MCY_NCCL_API_MAGIC, NCCL_API_MAGIC)
MCY_NCCL_SAME(MCY_NCCL_SPLIT_NOCOLOR, NCCL_SPLIT_NOCOLOR)
MCY_NCCL_SAME(MCY_NCCL_SUCCESS, ncclSuccess)
MCY_NCCL_SAME(MCY_NCCL_UNHANDLED_CUDA_ERROR, ncclUnhandledCudaError)
MCY_NCCL_SAME(MCY_NCCL_SYSTEM_ERROR, ncclSystemError)
MCY_NCCL_SAME(MCY_NCCL_INTERNAL_ERROR, ncclInternalError)
MCY_NCCL_SAME(MCY_NCCL_INVALID_ARGUMENT, ncclInvalidArgument)
MCY_NCCL_SAME(MCY_NCCL_INVALID_USAGE, ncclInvalidUsage)
MCY_NCCL_SAME(MCY_NCCL_REMOTE_ERROR, ncclRemoteError)
MCY_NCCL_SAME(MCY_NCCL_IN_PROGRESS, ncclInProgress)
MCY_NCCL_SAME(MCY_NCCL_TIMEOUT, ncclTimeout)
MCY_NCCL_SAME(MCY_NCCL_SUM, ncclSum)
MCY_NCCL_SAME(MCY_NCCL_PROD, ncclProd)
MCY_NCCL_SAME(MCY_NCCL_MAX, ncclMax)
MCY_NCCL_SAME(MCY_NCCL_MIN, ncclMin)
MCY_NCCL_SAME(MCY_NCCL_AVG, ncclAvg)
MCY_NCCL_SAME(MCY_NCCL_INT8, ncclInt8)
MCY_NCCL_SAME(MCY_NCCL_UINT8, ncclUint8)
MCY_NCCL_SAME(MCY_NCCL_INT32, ncclInt32)
MCY_NCCL_SAME(MCY_NCCL_UINT32, ncclUint32)
MCY_NCCL_SAME(MCY_NCCL_INT64, ncclInt64)
MCY_NCCL_SAME(MCY_NCCL_UINT64, ncclUint64)
MCY_NCCL_SAME(MCY_NCCL_FLOAT16, ncclFloat16)
MCY_NCCL_SAME(MCY_NCCL_FLOAT32, ncclFloat32)
MCY_NCCL_SAME(MCY_NCCL_FLOAT64, ncclFloat64)
MCY_NCCL_SAME(MCY_NCCL_BFLOAT16, ncclBfloat16)
MCY_NCCL_SAME(MCY_NCCL_FLOAT8E4M3, ncclFloat8e4m3)
MCY_NCCL_SAME(MCY_NCCL_FLOAT8E5M2, ncclFloat8e5m2)
MCY_NCCL_SAME(offsetof(mcy_nccl_config, size), offsetof(ncclConfig_t, size))
MCY_NCCL_SAME(offsetof(mcy_nccl_config, magic), offsetof(ncclConfig_t, magic))
MCY_NCCL_SAME(offsetof(mcy_nccl_config, version), offsetof(ncclConfig_t, version))
MCY_NCCL_SAME(offsetof(mcy_nccl_config, blocking), offsetof(ncclConfig_t, blocking))
_Static_assert(sizeof(ncclResult_t) == sizeof(int), "ncclResult_t is not int-sized");
_Static_assert(sizeof(ncclDataType_t) == sizeof(int), "ncclDataType_t is not int-sized");
_Static_assert(sizeof(ncclRedOp_t) == sizeof(int), "ncclRedOp_t is not int-sized");
_Static_assert(sizeof(ncclComm_t) == sizeof(void *), "ncclComm_t is not a pointer");
#undef MCY_NCCL_SAME
#endif

#endif /* MCY_NCCL_NAMES_H */
