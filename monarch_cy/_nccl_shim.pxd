# cython: language_level=3
# C-level API of monarch_cy._nccl_shim, for other Cython code:
#
#     from monarch_cy cimport _nccl_shim as nccl
#     cdef nccl.mcy_nccl_table* t = nccl.nccl_table()   # NcclUnavailable if unbound
#     with nogil:
#         st = t.fn.AllReduce(send, recv, n, dtype, op, comm, stream)
#     nccl.check_result(st, "AllReduce", comm)            # NcclError, as the shim raises
#
# The types below mirror monarch_cy/include/mcy_nccl_names.h (shipped with the
# package as include/*.h: add that folder to the include path).  The header's
# table (mcy_nccl) is static, so every C file including it has its own copy: the
# one the loader bound belongs to _nccl_shim and is reached only through
# nccl_table(), never by declaring mcy_nccl here.  Same rules as the Python API:
# the caller owns what it creates, optional slots (CommInitRankConfig,
# CommSplit) are NULL where the library lacks them, and the table must not be
# used across _nccl_shim.unbind() (ask nccl_table() again after rebinding).

cdef extern from "mcy_nccl_names.h" nogil:
    ctypedef int ncclResult_t
    ctypedef void* ncclComm_t
    ctypedef void* mcy_nccl_stream_t
    ctypedef struct ncclConfig_t:
        pass
    ctypedef struct ncclUniqueId:
        char internal[128]
    ctypedef struct mcy_nccl_config:
        size_t size
        unsigned int magic
        unsigned int version
        int blocking

    ctypedef struct mcy_nccl_fns:
        ncclResult_t (*GetVersion)(int*) noexcept nogil
        ncclResult_t (*GetUniqueId)(ncclUniqueId*) noexcept nogil
        ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int) noexcept nogil
        ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) noexcept nogil
        ncclResult_t (*CommDestroy)(ncclComm_t) noexcept nogil
        ncclResult_t (*CommAbort)(ncclComm_t) noexcept nogil
        ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) noexcept nogil
        ncclResult_t (*CommCount)(ncclComm_t, int*) noexcept nogil
        ncclResult_t (*CommCuDevice)(ncclComm_t, int*) noexcept nogil
        ncclResult_t (*CommUserRank)(ncclComm_t, int*) noexcept nogil
        ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*) noexcept nogil
        const char* (*GetErrorString)(ncclResult_t) noexcept nogil
        const char* (*GetLastError)(ncclComm_t) noexcept nogil
        ncclResult_t (*AllReduce)(const void*, void*, size_t, int, int, ncclComm_t, mcy_nccl_stream_t) noexcept nogil
        ncclResult_t (*Broadcast)(const void*, void*, size_t, int, int, ncclComm_t, mcy_nccl_stream_t) noexcept nogil
        ncclResult_t (*Reduce)(const void*, void*, size_t, int, int, int, ncclComm_t, mcy_nccl_stream_t) noexcept nogil
        ncclResult_t (*AllGather)(const void*, void*, size_t, int, ncclComm_t, mcy_nccl_stream_t) noexcept nogil
        ncclResult_t (*ReduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, mcy_nccl_stream_t) noexcept nogil
        ncclResult_t (*Send)(const void*, size_t, int, int, ncclComm_t, mcy_nccl_stream_t) noexcept nogil
        ncclResult_t (*Recv)(void*, size_t, int, int, ncclComm_t, mcy_nccl_stream_t) noexcept nogil
        ncclResult_t (*GroupStart)() noexcept nogil
        ncclResult_t (*GroupEnd)() noexcept nogil

    ctypedef union mcy_nccl_table:
        mcy_nccl_fns fn
        void* slot[1]


# The bound library's function table; raises NcclUnavailable while none is bound.
cdef mcy_nccl_table* nccl_table() except NULL

# 0 for ncclSuccess, 1 for ncclInProgress (non-blocking communicators); any other
# result raises NcclError with the library's text, as the shim's own calls do.
# ``call`` is the function's name without its prefix ("AllReduce"); ``comm`` may be NULL.
cdef int check_result(ncclResult_t st, str call, ncclComm_t comm) except -1
