/*
 * mcy_verbs.h -- the slice of libibverbs' ABI that monarch_cy._rdma uses, bound at run time.
 *
 * Written from rdma-core's <infiniband/verbs.h> (checked against rdma-core 44) so that the
 * extension builds without libibverbs-dev and imports without libibverbs.so.  Every type is
 * prefixed mcy_ so that a test can include this header next to the real one and prove each
 * size and offset (tests/rdma/test_verbs_header.py).
 *
 * Binding: monarch_cy._rdma.load() opens libibverbs.so.1 with ctypes, looks up one address per
 * entry of mcy_verbs_names and hands them to mcy_verbs_bind(), which fills mcy_vt; a NULL
 * slot after MCY_VERBS_NREQUIRED marks an optional symbol (ibv_reg_dmabuf_mr needs
 * rdma-core >= 34).  dlsym (under ctypes) returns each symbol's default version (the
 * IBVERBS_1.1 ibv_create_qp, ...), which is what code compiled against verbs.h links to.
 * No dl* call is made from C: the extension then references no glibc 2.34 symbol (dlopen
 * moved into libc there) and its wheel keeps an old manylinux tag.
 *
 * The data path: ibv_post_send and ibv_poll_cq are static inline in verbs.h and call through
 * the provider's table in the context (ctx->ops.post_send / ctx->ops.poll_cq);
 * mcy_ibv_post_send and mcy_ibv_poll_cq below do exactly that.  The provider fills that table
 * for every device (verbs_set_ops), so no libibverbs symbol is involved on the hot path.
 *
 * ibv_query_port is also inline in verbs.h; its exported symbol fills the older, shorter
 * port-attribute struct (a prefix of mcy_ibv_port_attr): we zero the whole struct first,
 * exactly as the compat branch of the inline does, and read only prefix fields.
 */
#ifndef MCY_VERBS_H
#define MCY_VERBS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ enums (values) */
enum {
    MCY_IBV_ACCESS_LOCAL_WRITE = 1,
    MCY_IBV_ACCESS_REMOTE_WRITE = 1 << 1,
    MCY_IBV_ACCESS_REMOTE_READ = 1 << 2,

    MCY_IBV_QPT_RC = 2,

    MCY_IBV_QPS_RESET = 0, MCY_IBV_QPS_INIT = 1, MCY_IBV_QPS_RTR = 2, MCY_IBV_QPS_RTS = 3,
    MCY_IBV_QPS_ERR = 6,

    MCY_IBV_QP_STATE = 1 << 0, MCY_IBV_QP_ACCESS_FLAGS = 1 << 3, MCY_IBV_QP_PKEY_INDEX = 1 << 4,
    MCY_IBV_QP_PORT = 1 << 5, MCY_IBV_QP_AV = 1 << 7, MCY_IBV_QP_PATH_MTU = 1 << 8,
    MCY_IBV_QP_TIMEOUT = 1 << 9, MCY_IBV_QP_RETRY_CNT = 1 << 10, MCY_IBV_QP_RNR_RETRY = 1 << 11,
    MCY_IBV_QP_RQ_PSN = 1 << 12, MCY_IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
    MCY_IBV_QP_MIN_RNR_TIMER = 1 << 15, MCY_IBV_QP_SQ_PSN = 1 << 16,
    MCY_IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17, MCY_IBV_QP_DEST_QPN = 1 << 20,

    MCY_IBV_WR_RDMA_WRITE = 0, MCY_IBV_WR_RDMA_READ = 4,
    MCY_IBV_SEND_SIGNALED = 1 << 1,

    MCY_IBV_WC_SUCCESS = 0, MCY_IBV_WC_RDMA_WRITE = 1, MCY_IBV_WC_RDMA_READ = 2,

    MCY_IBV_MTU_256 = 1, MCY_IBV_MTU_1024 = 3, MCY_IBV_MTU_4096 = 5,
    MCY_IBV_PORT_ACTIVE = 4,
    MCY_IBV_LINK_LAYER_INFINIBAND = 1, MCY_IBV_LINK_LAYER_ETHERNET = 2,
};

/* ------------------------------------------------------------------ structs (layouts) */
union mcy_ibv_gid {
    uint8_t raw[16];
    struct { uint64_t subnet_prefix; uint64_t interface_id; } global;
};

struct mcy_ibv_device {
    void *_ops[2];                  /* struct _ibv_device_ops */
    int node_type;
    int transport_type;
    char name[64];
    char dev_name[64];
    char dev_path[256];
    char ibdev_path[256];
};

struct mcy_ibv_device_attr {
    char fw_ver[64];
    uint64_t node_guid, sys_image_guid, max_mr_size, page_size_cap;
    uint32_t vendor_id, vendor_part_id, hw_ver;
    int max_qp, max_qp_wr;
    unsigned int device_cap_flags;
    int max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom,
        max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd,
        max_mw, max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach,
        max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr,
        max_srq_sge;
    uint16_t max_pkeys;
    uint8_t local_ca_ack_delay, phys_port_cnt;
};

struct mcy_ibv_context;
struct mcy_ibv_cq;
struct mcy_ibv_qp;
struct mcy_ibv_wc;
struct mcy_ibv_send_wr;

struct mcy_ibv_context_ops {
    void *_compat_query_device, *_compat_query_port, *_compat_alloc_pd, *_compat_dealloc_pd,
        *_compat_reg_mr, *_compat_rereg_mr, *_compat_dereg_mr, *alloc_mw, *bind_mw, *dealloc_mw,
        *_compat_create_cq;
    int (*poll_cq)(struct mcy_ibv_cq *cq, int num_entries, struct mcy_ibv_wc *wc);
    void *req_notify_cq, *_compat_cq_event, *_compat_resize_cq, *_compat_destroy_cq,
        *_compat_create_srq, *_compat_modify_srq, *_compat_query_srq, *_compat_destroy_srq,
        *post_srq_recv, *_compat_create_qp, *_compat_query_qp, *_compat_modify_qp,
        *_compat_destroy_qp;
    int (*post_send)(struct mcy_ibv_qp *qp, struct mcy_ibv_send_wr *wr,
                     struct mcy_ibv_send_wr **bad_wr);
    void *post_recv, *_compat_create_ah, *_compat_destroy_ah, *_compat_attach_mcast,
        *_compat_detach_mcast, *_compat_async_event;
};

struct mcy_ibv_context {
    struct mcy_ibv_device *device;
    struct mcy_ibv_context_ops ops;
    int cmd_fd;
    int async_fd;
    int num_comp_vectors;
    pthread_mutex_t mutex;
    void *abi_compat;
};

struct mcy_ibv_pd { struct mcy_ibv_context *context; uint32_t handle; };

struct mcy_ibv_mr {
    struct mcy_ibv_context *context;
    struct mcy_ibv_pd *pd;
    void *addr;
    size_t length;
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
};

struct mcy_ibv_cq {
    struct mcy_ibv_context *context;
    void *channel;
    void *cq_context;
    uint32_t handle;
    int cqe;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint32_t comp_events_completed;
    uint32_t async_events_completed;
};

struct mcy_ibv_qp {
    struct mcy_ibv_context *context;
    void *qp_context;
    struct mcy_ibv_pd *pd;
    struct mcy_ibv_cq *send_cq;
    struct mcy_ibv_cq *recv_cq;
    void *srq;
    uint32_t handle;
    uint32_t qp_num;
    int state;
    int qp_type;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint32_t events_completed;
};

struct mcy_ibv_port_attr {
    int state, max_mtu, active_mtu, gid_tbl_len;
    uint32_t port_cap_flags, max_msg_sz, bad_pkey_cntr, qkey_viol_cntr;
    uint16_t pkey_tbl_len, lid, sm_lid;
    uint8_t lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply, active_width,
        active_speed, phys_state, link_layer, flags;
    uint16_t port_cap_flags2;
};

struct mcy_ibv_wc {
    uint64_t wr_id;
    int status;
    int opcode;
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm_data;
    uint32_t qp_num;
    uint32_t src_qp;
    unsigned int wc_flags;
    uint16_t pkey_index;
    uint16_t slid;
    uint8_t sl;
    uint8_t dlid_path_bits;
};

struct mcy_ibv_sge { uint64_t addr; uint32_t length; uint32_t lkey; };

struct mcy_ibv_send_wr {
    uint64_t wr_id;
    struct mcy_ibv_send_wr *next;
    struct mcy_ibv_sge *sg_list;
    int num_sge;
    int opcode;
    unsigned int send_flags;
    uint32_t imm_data;
    union {
        struct { uint64_t remote_addr; uint32_t rkey; } rdma;
        struct { uint64_t remote_addr; uint64_t compare_add; uint64_t swap; uint32_t rkey; } atomic;
        struct { void *ah; uint32_t remote_qpn; uint32_t remote_qkey; } ud;
    } wr;
    union { struct { uint32_t remote_srqn; } xrc; } qp_type;
    union {
        struct {
            void *mw;
            uint32_t rkey;
            struct { void *mr; uint64_t addr; uint64_t length; unsigned int mw_access_flags; } bind_info;
        } bind_mw;
        struct { void *hdr; uint16_t hdr_sz; uint16_t mss; } tso;
    } ext;
};

struct mcy_ibv_qp_cap {
    uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};

struct mcy_ibv_qp_init_attr {
    void *qp_context;
    struct mcy_ibv_cq *send_cq;
    struct mcy_ibv_cq *recv_cq;
    void *srq;
    struct mcy_ibv_qp_cap cap;
    int qp_type;
    int sq_sig_all;
};

struct mcy_ibv_global_route {
    union mcy_ibv_gid dgid;
    uint32_t flow_label;
    uint8_t sgid_index;
    uint8_t hop_limit;
    uint8_t traffic_class;
};

struct mcy_ibv_ah_attr {
    struct mcy_ibv_global_route grh;
    uint16_t dlid;
    uint8_t sl, src_path_bits, static_rate, is_global, port_num;
};

struct mcy_ibv_qp_attr {
    int qp_state, cur_qp_state, path_mtu, path_mig_state;
    uint32_t qkey, rq_psn, sq_psn, dest_qp_num;
    unsigned int qp_access_flags;
    struct mcy_ibv_qp_cap cap;
    struct mcy_ibv_ah_attr ah_attr;
    struct mcy_ibv_ah_attr alt_ah_attr;
    uint16_t pkey_index, alt_pkey_index;
    uint8_t en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer,
        port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout;
    uint32_t rate_limit;
};

/* ------------------------------------------------------------------ function table */
typedef struct mcy_verbs_fns {
    /* required (rdma-core >= 1.1 ABI) */
    struct mcy_ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct mcy_ibv_device **list);
    struct mcy_ibv_context *(*open_device)(struct mcy_ibv_device *dev);
    int (*close_device)(struct mcy_ibv_context *ctx);
    int (*query_device)(struct mcy_ibv_context *ctx, struct mcy_ibv_device_attr *attr);
    int (*query_port)(struct mcy_ibv_context *ctx, uint8_t port, struct mcy_ibv_port_attr *attr);
    int (*query_gid)(struct mcy_ibv_context *ctx, uint8_t port, int index, union mcy_ibv_gid *gid);
    struct mcy_ibv_pd *(*alloc_pd)(struct mcy_ibv_context *ctx);
    int (*dealloc_pd)(struct mcy_ibv_pd *pd);
    struct mcy_ibv_mr *(*reg_mr)(struct mcy_ibv_pd *pd, void *addr, size_t length, int access);
    int (*dereg_mr)(struct mcy_ibv_mr *mr);
    struct mcy_ibv_cq *(*create_cq)(struct mcy_ibv_context *ctx, int cqe, void *cq_context,
                                    void *channel, int comp_vector);
    int (*destroy_cq)(struct mcy_ibv_cq *cq);
    struct mcy_ibv_qp *(*create_qp)(struct mcy_ibv_pd *pd, struct mcy_ibv_qp_init_attr *attr);
    int (*modify_qp)(struct mcy_ibv_qp *qp, struct mcy_ibv_qp_attr *attr, int attr_mask);
    int (*destroy_qp)(struct mcy_ibv_qp *qp);
    const char *(*wc_status_str)(int status);
    /* optional */
    struct mcy_ibv_mr *(*reg_dmabuf_mr)(struct mcy_ibv_pd *pd, uint64_t offset, size_t length,
                                        uint64_t iova, int fd, int access);
} mcy_verbs_fns;

#define MCY_VERBS_NFUNCS ((int)(sizeof(mcy_verbs_fns) / sizeof(void *)))
#define MCY_VERBS_NREQUIRED 17

static const char *const mcy_verbs_names[] = {
    "ibv_get_device_list", "ibv_free_device_list", "ibv_open_device", "ibv_close_device",
    "ibv_query_device", "ibv_query_port", "ibv_query_gid", "ibv_alloc_pd", "ibv_dealloc_pd", "ibv_reg_mr",
    "ibv_dereg_mr", "ibv_create_cq", "ibv_destroy_cq", "ibv_create_qp", "ibv_modify_qp",
    "ibv_destroy_qp", "ibv_wc_status_str",
    "ibv_reg_dmabuf_mr",
};

_Static_assert(sizeof(mcy_verbs_names) / sizeof(mcy_verbs_names[0]) == MCY_VERBS_NFUNCS,
               "one name per function-table slot");

typedef union mcy_verbs_table {
    mcy_verbs_fns fn;
    void *slot[sizeof(mcy_verbs_fns) / sizeof(void *)];
} mcy_verbs_table;

static mcy_verbs_table mcy_vt;
static int mcy_verbs_bound = 0;

/* Fill mcy_vt from `addresses` (one per mcy_verbs_names entry, NULL for a missing symbol,
 * looked up in the library `libname` by the caller).  0 on success; -1 with a sentence in
 * `err` if a required symbol is missing (the table is then left all NULL).  Not
 * thread-safe: the caller (Cython, holding the GIL) serializes it. */
static int mcy_verbs_bind(void *const *addresses, const char *libname, char *err, size_t errlen) {
    mcy_verbs_table t;
    int i;
    if (mcy_verbs_bound)
        return 0;
    memset(&t, 0, sizeof(t));
    for (i = 0; i < MCY_VERBS_NFUNCS; i++) {
        t.slot[i] = addresses[i];
        if (!t.slot[i] && i < MCY_VERBS_NREQUIRED) {
            snprintf(err, errlen, "%s lacks %s (not a libibverbs of rdma-core)",
                     libname, mcy_verbs_names[i]);
            return -1;
        }
    }
    mcy_vt = t;
    mcy_verbs_bound = 1;
    return 0;
}

/* verbs.h's static inline ibv_post_send / ibv_poll_cq, through the provider's ops table. */
static inline int mcy_ibv_post_send(struct mcy_ibv_qp *qp, struct mcy_ibv_send_wr *wr,
                                    struct mcy_ibv_send_wr **bad_wr) {
    return qp->context->ops.post_send(qp, wr, bad_wr);
}

static inline int mcy_ibv_poll_cq(struct mcy_ibv_cq *cq, int n, struct mcy_ibv_wc *wc) {
    return cq->context->ops.poll_cq(cq, n, wc);
}

#endif /* MCY_VERBS_H */
