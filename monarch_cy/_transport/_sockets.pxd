# The C socket declarations the transport's Cython tiers share (_unixio.pyx, the
# records of the unix:// transport; _fanout.pyx, the nogil forwarder): one place, so
# that the two cannot disagree on a struct.  Declared nogil: usable from either.

cdef extern from "<sys/uio.h>" nogil:
    struct iovec:
        void *iov_base
        size_t iov_len

cdef extern from "<sys/socket.h>" nogil:
    ctypedef unsigned int socklen_t
    ctypedef unsigned short sa_family_t
    struct sockaddr:
        sa_family_t sa_family
    struct msghdr:
        void *msg_name
        socklen_t msg_namelen
        iovec *msg_iov
        size_t msg_iovlen
        void *msg_control
        size_t msg_controllen
        int msg_flags
    struct cmsghdr:
        size_t cmsg_len
        int cmsg_level
        int cmsg_type
    cmsghdr *CMSG_FIRSTHDR(msghdr *)
    cmsghdr *CMSG_NXTHDR(msghdr *, cmsghdr *)
    unsigned char *CMSG_DATA(cmsghdr *)
    size_t CMSG_LEN(size_t)
    size_t CMSG_SPACE(size_t)
    ssize_t recvmsg(int, msghdr *, int)
    ssize_t sendmsg(int, const msghdr *, int)
    ssize_t send(int, const void *, size_t, int)
    int socket(int, int, int)
    int connect(int, const sockaddr *, socklen_t)
    int accept4(int, sockaddr *, socklen_t *, int)
    int setsockopt(int, int, int, const void *, socklen_t)
    int AF_UNIX, SOCK_SEQPACKET, SOCK_NONBLOCK, SOCK_CLOEXEC, SOL_SOCKET, SO_SNDBUF
    int SCM_RIGHTS, MSG_DONTWAIT, MSG_NOSIGNAL, MSG_CMSG_CLOEXEC, MSG_TRUNC, MSG_CTRUNC
