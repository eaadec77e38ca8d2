# Included by _fanout.pyx (one compilation unit with the forwarder's thread).
#
# Incoming: accepting, the proof before anything else, records split into messages.

# -- incoming ------------------------------------------------------------------------------
cdef void conn_close(Fwd *f, int fd) noexcept nogil:
    if fd < f.nconns:
        f.conns[fd].state = 0
    epoll_ctl(f.ep, EPOLL_CTL_DEL, fd, NULL)
    close(fd)


cdef bint check_proof(Fwd *f, const char *rec, ssize_t n) noexcept nogil:
    cdef unsigned char mac[32]
    cdef size_t i
    cdef unsigned char *grown
    if n != PROOF_LEN or rec[0] != R_PROOF:
        return False
    proof_mac(f, f.path, f.plen, f.inc, f.inclen, <const unsigned char *>rec + 1, mac)
    if not mcy_ct_equal(mac, <const unsigned char *>rec + 1 + NONCE, 32):
        return False
    for i in range(f.nnonces):                    # replayed?
        if memcmp_(<const char *>f.nonces + i * NONCE, rec + 1, NONCE):
            return False
    if f.nnonces == f.capnonces:
        grown = <unsigned char *>realloc(f.nonces, (f.capnonces * 2 + 16) * NONCE)
        if grown == NULL:
            return False
        f.nonces = grown
        f.capnonces = f.capnonces * 2 + 16
    memcpy(f.nonces + f.nnonces * NONCE, rec + 1, NONCE)
    f.nnonces += 1
    return True


cdef void on_record(Fwd *f, char *rec, size_t n, int mfd) noexcept nogil:
    """A proven connection's record: split it into messages and handle each."""
    cdef char **fr = f.fr
    cdef size_t *fl = f.fl
    cdef int k, i
    cdef size_t pos, total
    cdef char *m
    cdef uint8_t kind = <uint8_t>rec[0]
    if kind == R_ONE and mfd < 0:
        fr[0] = rec + 1
        fl[0] = n - 1
        handle(f, fr, fl, 1)
    elif (kind == R_MANY or kind == R_BATCH) and mfd < 0 and n >= 3:
        k = (<uint8_t>rec[1]) | (<uint8_t>rec[2]) << 8
        if k < 1 or k > MAX_FRAMES or 3 + 4 * <size_t>k > n:
            f.malformed += 1
            return
        pos = 3 + 4 * <size_t>k
        for i in range(k):
            fl[i] = rd32(rec + 3 + 4 * i)
            fr[i] = rec + pos
            pos += fl[i]
        if pos != n:
            f.malformed += 1
            return
        if kind == R_MANY:
            handle(f, fr, fl, k)
        else:
            for i in range(k):
                handle(f, fr + i, fl + i, 1)
    elif kind == R_SPILL and mfd >= 0 and n >= 3:
        k = (<uint8_t>rec[1]) | (<uint8_t>rec[2]) << 8
        if k < 1 or k > MAX_FRAMES or 3 + 8 * <size_t>k != n:
            f.malformed += 1
            return
        total = 0
        for i in range(k):
            fl[i] = rd32(rec + 3 + 8 * i) | (<size_t>rd32(rec + 7 + 8 * i)) << 32
            total += fl[i]
        if total == 0:
            f.malformed += 1
            return
        m = <char *>mmap(NULL, total, PROT_READ, MAP_PRIVATE, mfd, 0)
        if <void *>m == MAP_FAILED:
            f.malformed += 1
            return
        pos = 0
        for i in range(k):
            fr[i] = m + pos
            pos += fl[i]
        f.spilled += 1
        handle(f, fr, fl, k)
        munmap(m, total)
    else:
        f.malformed += 1


cdef void conn_read(Fwd *f, int fd) noexcept nogil:
    """Read what ``fd`` holds (at most 64 records a turn, then the others' turn)."""
    cdef msghdr msg
    cdef iovec iov
    cdef char ctl[64]
    cdef cmsghdr *c
    cdef ssize_t n
    cdef int got, mfd, extra, turn
    cdef int *p
    cdef size_t k, i
    for turn in range(64):
        if fd >= f.nconns or f.conns[fd].state == 0:
            return
        memset(&msg, 0, sizeof(msg))
        iov.iov_base = f.rbuf
        iov.iov_len = MAX_RECORD + 64
        msg.msg_iov = &iov
        msg.msg_iovlen = 1
        msg.msg_control = ctl
        msg.msg_controllen = CMSG_SPACE(4 * sizeof(int))
        n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)
        if n < 0 and errno == EINTR:
            continue
        if n < 0 and errno == EAGAIN:
            return
        mfd = -1
        extra = 0
        if n >= 0 and msg.msg_controllen:
            c = CMSG_FIRSTHDR(&msg)
            while c != NULL:
                if c.cmsg_level == SOL_SOCKET and c.cmsg_type == SCM_RIGHTS \
                        and c.cmsg_len >= CMSG_LEN(0):
                    k = (c.cmsg_len - CMSG_LEN(0)) // sizeof(int)
                    p = <int *>CMSG_DATA(c)
                    for i in range(k):
                        if mfd < 0:
                            mfd = p[i]
                        else:
                            close(p[i])
                            extra += 1
                c = CMSG_NXTHDR(&msg, c)
        if n <= 0 or (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) or extra:
            if mfd >= 0:
                close(mfd)
            if n != 0 and f.conns[fd].state == 1:
                f.refused += 1
            elif n != 0:
                f.malformed += 1
            conn_close(f, fd)
            return
        if f.conns[fd].state == 1:
            if mfd >= 0 or not check_proof(f, f.rbuf, n):
                if mfd >= 0:
                    close(mfd)
                f.refused += 1
                conn_close(f, fd)
                return
            f.conns[fd].state = 2
            continue
        on_record(f, f.rbuf, <size_t>n, mfd)
        if mfd >= 0:
            close(mfd)


cdef void do_accept(Fwd *f) noexcept nogil:
    cdef int fd, nc
    cdef Conn *grown
    cdef epoll_event ev
    while True:
        fd = accept4(f.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)
        if fd < 0:
            if errno == EINTR:
                continue
            return
        if fd >= f.nconns:
            nc = fd * 2 + 16
            grown = <Conn *>realloc(f.conns, nc * sizeof(Conn))
            if grown == NULL:
                close(fd)
                continue
            memset(grown + f.nconns, 0, (nc - f.nconns) * sizeof(Conn))
            f.conns, f.nconns = grown, nc
        ev.events = EPOLLIN
        ev.data.u64 = (<uint64_t>T_CONN << 32) | <uint32_t>fd
        if epoll_ctl(f.ep, EPOLL_CTL_ADD, fd, &ev) != 0:
            close(fd)
            continue
        f.conns[fd].state = 1
        f.conns[fd].deadline = now() + f.auth_timeout
