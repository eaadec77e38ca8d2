# cython: language_level=3
# Declarations of monarch_cy/include/mcy_verbs.h (the libibverbs ABI slice, bound at run time).

from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "mcy_verbs.h" nogil:
    enum:
        MCY_IBV_ACCESS_LOCAL_WRITE
        MCY_IBV_ACCESS_REMOTE_WRITE
        MCY_IBV_ACCESS_REMOTE_READ
        MCY_IBV_QPT_RC
        MCY_IBV_QPS_RESET
        MCY_IBV_QPS_INIT
        MCY_IBV_QPS_RTR
        MCY_IBV_QPS_RTS
        MCY_IBV_QPS_ERR
        MCY_IBV_QP_STATE
        MCY_IBV_QP_ACCESS_FLAGS
        MCY_IBV_QP_PKEY_INDEX
        MCY_IBV_QP_PORT
        MCY_IBV_QP_AV
        MCY_IBV_QP_PATH_MTU
        MCY_IBV_QP_TIMEOUT
        MCY_IBV_QP_RETRY_CNT
        MCY_IBV_QP_RNR_RETRY
        MCY_IBV_QP_RQ_PSN
        MCY_IBV_QP_MAX_QP_RD_ATOMIC
        MCY_IBV_QP_MIN_RNR_TIMER
        MCY_IBV_QP_SQ_PSN
        MCY_IBV_QP_MAX_DEST_RD_ATOMIC
        MCY_IBV_QP_DEST_QPN
        MCY_IBV_WR_RDMA_WRITE
        MCY_IBV_WR_RDMA_READ
        MCY_IBV_SEND_SIGNALED
        MCY_IBV_WC_SUCCESS
        MCY_IBV_PORT_ACTIVE
        MCY_IBV_LINK_LAYER_INFINIBAND
        MCY_IBV_LINK_LAYER_ETHERNET

    cdef union mcy_ibv_gid:
        uint8_t raw[16]

    cdef struct mcy_ibv_device:
        char name[64]

    cdef struct mcy_ibv_device_attr:
        char fw_ver[64]
        uint64_t max_mr_size
        uint32_t vendor_id
        uint32_t vendor_part_id
        int max_qp_wr
        int max_sge
        int max_cqe
        int max_qp_rd_atom
        int max_qp_init_rd_atom
        uint8_t phys_port_cnt

    cdef struct mcy_ibv_context:
        pass

    cdef struct mcy_ibv_pd:
        pass

    cdef struct mcy_ibv_mr:
        void* addr
        size_t length
        uint32_t lkey
        uint32_t rkey

    cdef struct mcy_ibv_cq:
        pass

    cdef struct mcy_ibv_qp:
        uint32_t qp_num

    cdef struct mcy_ibv_port_attr:
        int state
        int active_mtu
        int gid_tbl_len
        uint32_t max_msg_sz
        uint16_t lid
        uint8_t link_layer

    cdef struct mcy_ibv_wc:
        uint64_t wr_id
        int status
        int opcode
        uint32_t vendor_err
        uint32_t byte_len

    cdef struct mcy_ibv_sge:
        uint64_t addr
        uint32_t length
        uint32_t lkey

    cdef struct _mcy_wr_rdma:
        uint64_t remote_addr
        uint32_t rkey

    cdef union _mcy_wr_union:
        _mcy_wr_rdma rdma

    cdef struct mcy_ibv_send_wr:
        uint64_t wr_id
        mcy_ibv_send_wr* next
        mcy_ibv_sge* sg_list
        int num_sge
        int opcode
        unsigned int send_flags
        _mcy_wr_union wr

    cdef struct mcy_ibv_qp_cap:
        uint32_t max_send_wr
        uint32_t max_recv_wr
        uint32_t max_send_sge
        uint32_t max_recv_sge
        uint32_t max_inline_data

    cdef struct mcy_ibv_qp_init_attr:
        mcy_ibv_cq* send_cq
        mcy_ibv_cq* recv_cq
        mcy_ibv_qp_cap cap
        int qp_type
        int sq_sig_all

    cdef struct mcy_ibv_global_route:
        mcy_ibv_gid dgid
        uint32_t flow_label
        uint8_t sgid_index
        uint8_t hop_limit
        uint8_t traffic_class

    cdef struct mcy_ibv_ah_attr:
        mcy_ibv_global_route grh
        uint16_t dlid
        uint8_t sl
        uint8_t is_global
        uint8_t port_num

    cdef struct mcy_ibv_qp_attr:
        int qp_state
        int path_mtu
        uint32_t rq_psn
        uint32_t sq_psn
        uint32_t dest_qp_num
        unsigned int qp_access_flags
        mcy_ibv_ah_attr ah_attr
        uint16_t pkey_index
        uint8_t max_rd_atomic
        uint8_t max_dest_rd_atomic
        uint8_t min_rnr_timer
        uint8_t port_num
        uint8_t timeout
        uint8_t retry_cnt
        uint8_t rnr_retry

    ctypedef struct mcy_verbs_fns:
        mcy_ibv_device** (*get_device_list)(int*) noexcept nogil
        void (*free_device_list)(mcy_ibv_device**) noexcept nogil
        mcy_ibv_context* (*open_device)(mcy_ibv_device*) noexcept nogil
        int (*close_device)(mcy_ibv_context*) noexcept nogil
        int (*query_device)(mcy_ibv_context*, mcy_ibv_device_attr*) noexcept nogil
        int (*query_port)(mcy_ibv_context*, uint8_t, mcy_ibv_port_attr*) noexcept nogil
        int (*query_gid)(mcy_ibv_context*, uint8_t, int, mcy_ibv_gid*) noexcept nogil
        mcy_ibv_pd* (*alloc_pd)(mcy_ibv_context*) noexcept nogil
        int (*dealloc_pd)(mcy_ibv_pd*) noexcept nogil
        mcy_ibv_mr* (*reg_mr)(mcy_ibv_pd*, void*, size_t, int) noexcept nogil
        int (*dereg_mr)(mcy_ibv_mr*) noexcept nogil
        mcy_ibv_cq* (*create_cq)(mcy_ibv_context*, int, void*, void*, int) noexcept nogil
        int (*destroy_cq)(mcy_ibv_cq*) noexcept nogil
        mcy_ibv_qp* (*create_qp)(mcy_ibv_pd*, mcy_ibv_qp_init_attr*) noexcept nogil
        int (*modify_qp)(mcy_ibv_qp*, mcy_ibv_qp_attr*, int) noexcept nogil
        int (*destroy_qp)(mcy_ibv_qp*) noexcept nogil
        const char* (*wc_status_str)(int) noexcept nogil
        mcy_ibv_mr* (*reg_dmabuf_mr)(mcy_ibv_pd*, uint64_t, size_t, uint64_t, int, int) noexcept nogil

    ctypedef union mcy_verbs_table:
        mcy_verbs_fns fn

    mcy_verbs_table mcy_vt
    int mcy_verbs_bind(void* const* addresses, const char* libname, char* err, size_t errlen)
    const char* const mcy_verbs_names[]
    enum: MCY_VERBS_NFUNCS
    int mcy_ibv_post_send(mcy_ibv_qp* qp, mcy_ibv_send_wr* wr, mcy_ibv_send_wr** bad_wr)
    int mcy_ibv_poll_cq(mcy_ibv_cq* cq, int n, mcy_ibv_wc* wc)


cdef class WorkBatch:
    cdef mcy_ibv_send_wr* _wrs
    cdef mcy_ibv_sge* _sges
    cdef Py_ssize_t _n
    cdef uint64_t _nbytes
    cdef uint64_t _wr_id_base
    cdef readonly int opcode
