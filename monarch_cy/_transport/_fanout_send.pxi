# Included by _fanout.pyx (one compilation unit with the forwarder's thread).
#
# Outgoing: records built from pieces, one connection and an ordered backlog per
# destination, connecting with the proof the destination's link names, retries.

# -- outgoing --------------------------------------------------------------------------
cdef void free_rec(Rec *r) noexcept nogil:
    if r.mfd >= 0:
        close(r.mfd)
    free(r.buf)
    free(r)


cdef Rec *build_rec(iovec *pc, int npc, size_t *flen, int nf) noexcept nogil:
    """One record (``unix_records.record``) of ``nf`` frames whose bytes are the
    pieces ``pc`` in order (frame i is ``flen[i]`` bytes); NULL when out of memory."""
    cdef size_t total = 0, pos, hl
    cdef int i
    cdef Rec *r = <Rec *>malloc(sizeof(Rec))
    cdef ssize_t w
    cdef char *p
    if r == NULL:
        return NULL
    r.next = NULL
    r.mfd = -1
    for i in range(nf):
        total += flen[i]
    if nf == 1 and total < MAX_RECORD:
        hl = 1
    elif total + 3 + 4 * <size_t>nf <= MAX_RECORD and nf < MAX_IOV:
        hl = 3 + 4 * <size_t>nf
    else:                                          # spilled to a memfd
        hl = 3 + 8 * <size_t>nf
        r.buf = <char *>malloc(hl)
        if r.buf == NULL:
            free(r)
            return NULL
        r.len = hl
        r.buf[0] = R_SPILL
        r.buf[1] = <char>(nf & 0xFF)
        r.buf[2] = <char>(nf >> 8)
        for i in range(nf):
            wr32(r.buf + 3 + 8 * i, <uint32_t>flen[i])
            wr32(r.buf + 7 + 8 * i, <uint32_t>(flen[i] >> 32))
        r.mfd = <int>syscall(SYS_memfd_create, <const char *>b"monarch_cy-msg", MFD_CLOEXEC)
        if r.mfd < 0:
            free_rec(r)
            return NULL
        for i in range(npc):
            pos = 0
            while pos < pc[i].iov_len:
                w = write(r.mfd, <char *>pc[i].iov_base + pos, pc[i].iov_len - pos)
                if w < 0:
                    if errno == EINTR:
                        continue
                    free_rec(r)
                    return NULL
                pos += <size_t>w
        return r
    r.buf = <char *>malloc(hl + total)
    if r.buf == NULL:
        free(r)
        return NULL
    r.len = hl + total
    if hl == 1:
        r.buf[0] = R_ONE
    else:
        r.buf[0] = R_MANY
        r.buf[1] = <char>(nf & 0xFF)
        r.buf[2] = <char>(nf >> 8)
        for i in range(nf):
            wr32(r.buf + 3 + 4 * i, <uint32_t>flen[i])
    p = r.buf + hl
    for i in range(npc):
        memcpy(p, pc[i].iov_base, pc[i].iov_len)
        p += pc[i].iov_len
    return r


cdef int add_frames(Fwd *f, int npc, char **fr, size_t *fl, int j0, int nf) noexcept nogil:
    """Frames ``j0`` to ``nf - 1`` of a received message as the next pieces of a send
    (``f.pc`` from ``npc`` on), each a frame of its own (``f.flen``); the piece count
    after them."""
    cdef int j
    for j in range(j0, nf):
        f.pc[npc].iov_base = fr[j]
        f.pc[npc].iov_len = fl[j]
        f.flen[j] = fl[j]
        npc += 1
    return npc


cdef int push(int fd, Rec *r) noexcept nogil:
    """Send one record now: 0, or -errno."""
    cdef msghdr msg
    cdef iovec iov
    cdef char ctl[64]
    cdef cmsghdr *c
    cdef ssize_t n
    memset(&msg, 0, sizeof(msg))
    iov.iov_base = r.buf
    iov.iov_len = r.len
    msg.msg_iov = &iov
    msg.msg_iovlen = 1
    if r.mfd >= 0:
        memset(ctl, 0, 64)
        msg.msg_control = ctl
        msg.msg_controllen = CMSG_SPACE(sizeof(int))
        c = CMSG_FIRSTHDR(&msg)
        c.cmsg_level = SOL_SOCKET
        c.cmsg_type = SCM_RIGHTS
        c.cmsg_len = CMSG_LEN(sizeof(int))
        memcpy(CMSG_DATA(c), &r.mfd, sizeof(int))
    while True:
        n = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL)
        if n >= 0 or errno != EINTR:
            break
    if n < 0:
        return -errno
    return 0


cdef Dest *dest_for(Fwd *f, const char *path, size_t plen) noexcept nogil:
    cdef int i
    cdef Dest *d
    cdef Dest **grown
    if plen == 0 or plen >= MAX_PATH:
        return NULL
    for i in range(f.ndests):
        d = f.dests[i]
        if d.plen == plen and memcmp_(d.path, path, plen):
            return d
    d = <Dest *>calloc(1, sizeof(Dest))
    grown = <Dest **>realloc(f.dests, (f.ndests + 1) * sizeof(Dest *))
    if d == NULL or grown == NULL:
        free(d)
        if grown != NULL:
            f.dests = grown
        return NULL
    f.dests = grown
    memcpy(d.path, path, plen)
    d.path[plen] = 0
    d.plen = plen
    d.fd = -1
    d.idx = f.ndests
    f.dests[f.ndests] = d
    f.ndests += 1
    return d


cdef inline bint memcmp_(const char *a, const char *b, size_t n) noexcept nogil:
    cdef size_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef bint dest_connect(Fwd *f, Dest *d) noexcept nogil:
    """Connect to the incarnation ``d.path`` links to now and send its proof."""
    cdef char name[MAX_PATH]
    cdef ssize_t nl
    cdef sockaddr_un sa
    cdef size_t dl
    cdef int fd, one = SNDBUF
    cdef unsigned char rec[PROOF_LEN]
    cdef epoll_event ev
    cdef size_t i
    nl = readlink(d.path, name, MAX_PATH - 1)
    if nl <= 0:
        return False
    dl = d.plen
    while dl > 0 and d.path[dl - 1] != b'/':
        dl -= 1
    if dl + <size_t>nl >= 108:
        return False
    memset(&sa, 0, sizeof(sa))
    sa.sun_family = AF_UNIX
    memcpy(sa.sun_path, d.path, dl)
    memcpy(sa.sun_path + dl, name, <size_t>nl)
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)
    if fd < 0:
        return False
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &one, sizeof(int))
    if connect(fd, <sockaddr *>&sa, sizeof(sa)) != 0:
        close(fd)
        return False
    rec[0] = R_PROOF
    if syscall(SYS_getrandom, rec + 1, <size_t>NONCE, <unsigned int>0) != NONCE:
        close(fd)
        return False
    proof_mac(f, d.path, d.plen, name, <size_t>nl, rec + 1, rec + 1 + NONCE)
    if send(fd, rec, PROOF_LEN, MSG_DONTWAIT | MSG_NOSIGNAL) != PROOF_LEN:
        close(fd)
        return False
    ev.events = 0
    ev.data.u64 = (<uint64_t>T_DEST << 32) | <uint32_t>d.idx
    if epoll_ctl(f.ep, EPOLL_CTL_ADD, fd, &ev) != 0:
        close(fd)
        return False
    d.fd = fd
    d.ever = True
    d.first_try = 0
    d.retry_at = 0
    return True


cdef void dest_drop(Fwd *f, Dest *d) noexcept nogil:
    """The peer is gone: close, and drop what waited for it."""
    cdef Rec *r
    if d.fd >= 0:
        epoll_ctl(f.ep, EPOLL_CTL_DEL, d.fd, NULL)
        close(d.fd)
        d.fd = -1
    d.writing = False
    d.first_try = 0
    d.retry_at = 0
    d.ever = False
    while d.head != NULL:
        r = d.head
        d.head = r.next
        free_rec(r)
        f.dropped += 1
    d.tail = NULL


cdef void want_write(Fwd *f, Dest *d, bint on) noexcept nogil:
    cdef epoll_event ev
    if d.fd < 0 or d.writing == on:
        return
    ev.events = EPOLLOUT if on else 0
    ev.data.u64 = (<uint64_t>T_DEST << 32) | <uint32_t>d.idx
    epoll_ctl(f.ep, EPOLL_CTL_MOD, d.fd, &ev)
    d.writing = on


cdef void dest_flush(Fwd *f, Dest *d) noexcept nogil:
    """Send the backlog in order, connecting first if need be."""
    cdef Rec *r
    cdef int err
    cdef double t
    if d.fd < 0:
        if d.head == NULL:
            return
        if not dest_connect(f, d):
            t = now()
            if d.ever:                       # it was there and went away
                dest_drop(f, d)
                return
            if d.first_try == 0:
                d.first_try = t
            if t - d.first_try >= GIVE_UP:
                dest_drop(f, d)
                return
            d.retry_at = t + (RETRY_FAST if t - d.first_try < FAST_FOR else RETRY_SLOW)
            return
    while d.head != NULL:
        r = d.head
        err = push(d.fd, r)
        if err == -EAGAIN:
            want_write(f, d, True)
            return
        if err != 0:
            dest_drop(f, d)
            return
        d.head = r.next
        free_rec(r)
    d.tail = NULL
    want_write(f, d, False)


cdef void dest_send(Fwd *f, Dest *d, Rec *r) noexcept nogil:
    """Send ``r`` to ``d`` after what waits there (takes ``r``)."""
    cdef int err
    if d.head == NULL and d.fd >= 0:
        err = push(d.fd, r)
        if err == 0:
            free_rec(r)
            return
        if err != -EAGAIN:
            # The peer went away: what was queued for it is dropped, but this message
            # may be for the respawned proc that now owns the path (the controller
            # sent it after the revive): it waits, and the connect is retried as for
            # a peer not listening yet (a peer that stays gone drops it after 10 s;
            # the controller has failed what waited on it).
            dest_drop(f, d)
    if d.tail == NULL:
        d.head = d.tail = r
    else:
        d.tail.next = r
        d.tail = r
    dest_flush(f, d)
