# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The nogil forwarder: a proc's part of a fan-out, done by a C thread that never
takes the GIL.

Why hand-written C: a cast tree's heads are worker procs whose actor shares the
interpreter with the node's I/O thread.  An actor in C code that keeps the GIL (or in
a long pure-Python loop, which hands it over only every switch interval) would hold
every message its subtree waits for.  This thread reads the proc's *fan-out inbox*
(:mod:`.fanout`: an AF_UNIX seqpacket socket of its own, beside the node's inbox) and
passes each message on to the fan-out inboxes of the procs below and to the actors it
names, touching no Python object: the GIL is never needed, so a head's subtree is
served whatever its actor does.

What it reads (the layout is :mod:`.fanout`'s, which packs it): a first frame of
``0xFA 2 | u16 template length | u16 patch offset | u32 route length | u8 mode |
u8 up is a forwarder | u16 reply address offset | u16 its length | u64 port |
u16 up path length | up path | template | route | payload``, then extra frames.
The route says how many replies its subtree owes (``u32``), which actor inboxes this
proc delivers to (with each one's rank in the call) and which fan-out inboxes get the
message next (with their own routes).  To an actor it sends ``template`` (the call
header, pickled by the sender) with the rank patched in as 4 little-endian bytes at
the patch offset, then the payload, then the extra frames: a call that unpacks to
what the sender would have sent it directly.  To each forwarder below it sends the
same message with that forwarder's route.  Forwarders first, then actors, in route
order; per destination, messages leave in the order they arrived (one thread, one
connection per destination, a backlog in order when a socket is full).

Replies.  With mode 0 every actor answers the caller's reply address itself.  With a
gathering mode (``call``, ``Accumulator``, ``stream``) this thread gathers its
subtree's replies and sends them up in batches, again without the GIL
(``_fanout_gather.pxi``): the caller receives about one message per head per call.

Authentication is the ``unix://`` transport's (:mod:`.unixsock`): the first record
of every accepted connection must be a proof for this inbox's path and incarnation,
HMAC-SHA256 with the job secret, with a nonce never seen before; nothing else on
that connection is read before it, and a connection that proves nothing within the
auth timeout is closed.  Outgoing connections send the proof for the incarnation the
destination's link names.  Nothing received is unpickled here at all.

Failures are counted, never raised (:meth:`Forwarder.stats`): a malformed message is
dropped; a destination not listening yet is retried (1 ms, then 50 ms after 2 s) for
10 s, then what waits for it is dropped; a destination that went away (``EPIPE``)
loses what was queued for it, and the message in hand waits for a reconnection
(retried as above) to the incarnation its link names then: a respawned proc's, which
a cast sent after the revive is for (the Python outlets, too, keep and reconnect).
Whoever waits on a dropped message learns of it from the proc's death (the controller
fails those ranks).
"""

from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset, strlen
from libc.errno cimport errno, EINTR, EAGAIN

__all__ = ["Forwarder", "hmac_sha256", "MAGIC"]

MAGIC = 0xFA

cdef extern from "mcy_hmac.h" nogil:
    int mcy_hmac_sha256(const unsigned char *key, size_t klen, const void *const *parts,
                        const size_t *lens, int n, unsigned char *out)
    int mcy_ct_equal(const unsigned char *a, const unsigned char *b, size_t n)

from monarch_cy._transport._sockets cimport (
    AF_UNIX, CMSG_DATA, CMSG_FIRSTHDR, CMSG_LEN, CMSG_NXTHDR, CMSG_SPACE, MSG_CMSG_CLOEXEC,
    MSG_CTRUNC, MSG_DONTWAIT, MSG_NOSIGNAL, MSG_TRUNC, SCM_RIGHTS, SO_SNDBUF, SOCK_CLOEXEC,
    SOCK_NONBLOCK, SOCK_SEQPACKET, SOL_SOCKET, accept4, cmsghdr, connect, iovec, msghdr,
    recvmsg, sa_family_t, send, sendmsg, setsockopt, sockaddr, socket, socklen_t)

cdef extern from "<sys/un.h>" nogil:
    struct sockaddr_un:
        sa_family_t sun_family
        char sun_path[108]

cdef extern from "<sys/epoll.h>" nogil:
    union epoll_data_t:
        uint64_t u64
    struct epoll_event:
        uint32_t events
        epoll_data_t data
    int epoll_create1(int)
    int epoll_ctl(int, int, int, epoll_event *)
    int epoll_wait(int, epoll_event *, int, int)
    int EPOLL_CTL_ADD, EPOLL_CTL_MOD, EPOLL_CTL_DEL, EPOLLIN, EPOLLOUT, EPOLL_CLOEXEC

cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int, int)
    int EFD_NONBLOCK, EFD_CLOEXEC

cdef extern from "<sys/mman.h>" nogil:
    void *mmap(void *, size_t, int, int, int, long)
    int munmap(void *, size_t)
    int PROT_READ, MAP_PRIVATE
    void *MAP_FAILED

# memfd_create and getrandom through syscall(2): their glibc wrappers (2.27, 2.25) are
# newer than the manylinux_2_17 baseline the wheels promise; the kernel calls are not.
cdef extern from "<sys/syscall.h>" nogil:
    long SYS_memfd_create, SYS_getrandom

cdef extern from "<linux/memfd.h>" nogil:
    unsigned int MFD_CLOEXEC

cdef extern from "<unistd.h>" nogil:
    long syscall(long, ...)
    int close(int)
    ssize_t read(int, void *, size_t)
    ssize_t write(int, const void *, size_t)
    ssize_t readlink(const char *, char *, size_t)

cdef extern from "<time.h>" nogil:
    struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(int, timespec *)
    int CLOCK_MONOTONIC


# -- the unix:// records (monarch_cy/_transport/unix_records.py) ---------------------
DEF MAX_RECORD = 61440           # 60 KiB: larger messages are spilled to a memfd
DEF R_ONE = 0
DEF R_MANY = 1
DEF R_SPILL = 2
DEF R_PROOF = 3
DEF R_BATCH = 4
DEF NONCE = 16
DEF PROOF_LEN = 49               # kind, nonce, HMAC-SHA256
DEF MAX_IOV = 1000
DEF SNDBUF = 4194304
DEF MAGIC_ = 0xFA
DEF HDR = 26                     # this module's first-frame header (then the up path)
DEF MAX_FRAMES = 65535           # frames of one message (a record's u16 count)
DEF MAX_PATH = 256
DEF T_LISTEN = 1
DEF T_WAKE = 2
DEF T_CONN = 3
DEF T_DEST = 4
DEF RETRY_FAST = 0.001
DEF RETRY_SLOW = 0.05
DEF FAST_FOR = 2.0
DEF GIVE_UP = 10.0

cdef const char *TAG = b"monarch_cy unix v2|"   # unix_records._TAG


cdef struct Rec:                  # one record waiting in a destination's backlog
    Rec *next
    char *buf
    size_t len
    int mfd


cdef struct Dest:                 # this proc's connection to one inbox
    char path[MAX_PATH]
    size_t plen
    int fd
    int idx
    bint writing                  # EPOLLOUT armed
    bint ever                     # was connected once (then a failure drops)
    double first_try              # when connecting began (0: not trying)
    double retry_at               # 0: no retry due
    Rec *head
    Rec *tail


cdef struct Gather


cdef struct Conn:
    int state                     # 0 none, 1 unproven, 2 proven
    double deadline


cdef struct Fwd:
    int lfd, ep, efd
    char path[MAX_PATH]
    size_t plen
    char inc[128]
    size_t inclen
    unsigned char secret[64]
    size_t slen
    double auth_timeout
    Conn *conns
    int nconns
    Dest **dests
    int ndests
    unsigned char *nonces
    size_t nnonces, capnonces
    char *rbuf
    iovec *pc                     # scratch: MAX_FRAMES + 4 pieces of one send
    size_t *flen                  # scratch: frame lengths of one send
    char **fr                     # scratch: frames of one received message
    size_t *fl                    # scratch: their lengths
    char *tbuf                    # scratch: a call template with this reply address
    char *hbuf                    # scratch: a header with this inbox as the way up
    Gather **gt                   # the gathers, by port (_fanout_gather.pxi)
    size_t gcap, gn
    Gather *dirty                 # PER_TURN gathers to flush at the end of the turn
    bint stop
    double linger                 # set before the stop: seconds to flush backlogs
    # counters (read by stats(); written by the thread only)
    uint64_t received, forwarded, delivered, dropped, refused, malformed, spilled
    uint64_t gathered, batched, stray


cdef inline double now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline uint32_t rd32(const char *p) noexcept nogil:
    return (<uint8_t>p[0]) | (<uint32_t><uint8_t>p[1]) << 8 | \
        (<uint32_t><uint8_t>p[2]) << 16 | (<uint32_t><uint8_t>p[3]) << 24


cdef inline uint16_t rd16(const char *p) noexcept nogil:
    return (<uint8_t>p[0]) | (<uint16_t><uint8_t>p[1]) << 8


cdef inline void wr32(char *p, uint32_t v) noexcept nogil:
    p[0] = <char>(v & 0xFF)
    p[1] = <char>((v >> 8) & 0xFF)
    p[2] = <char>((v >> 16) & 0xFF)
    p[3] = <char>((v >> 24) & 0xFF)


cdef void proof_mac(Fwd *f, const char *path, size_t plen, const char *inc, size_t ilen,
                    const unsigned char *nonce, unsigned char *out) noexcept nogil:
    """``unix_records.proof``: HMAC(secret, TAG | path | "|" | incarnation | "|" | nonce)."""
    cdef const void *parts[6]
    cdef size_t lens[6]
    parts[0] = TAG
    lens[0] = strlen(TAG)
    parts[1] = path
    lens[1] = plen
    parts[2] = b"|"
    lens[2] = 1
    parts[3] = inc
    lens[3] = ilen
    parts[4] = b"|"
    lens[4] = 1
    parts[5] = nonce
    lens[5] = NONCE
    mcy_hmac_sha256(f.secret, f.slen, parts, lens, 6, out)


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


include "_fanout_gather.pxi"


# -- one message -------------------------------------------------------------------------
cdef void handle(Fwd *f, char **fr, size_t *fl, int nf) noexcept nogil:
    """One message: a cast to pass on (``0xFA``), or what comes back up."""
    f.received += 1
    if nf > MAX_FRAMES or fl[0] < 1:
        f.malformed += 1
    elif <uint8_t>fr[0][0] == MAGIC_:
        handle_cast(f, fr, fl, nf)
    elif REPLY_MAGIC <= <uint8_t>fr[0][0] <= PASS_MAGIC:
        on_up(f, fr, fl, nf)
    else:
        f.malformed += 1


cdef bint route_ok(const char *route, size_t rl, size_t *here_at,
                   size_t *child_at) noexcept nogil:
    """Whether the route (``u32 count | u32 n | n x (u32 rank | u16 len | path) |
    u32 m | m x (u16 len | path | u32 len | route)``) is whole; where its parts
    start."""
    cdef size_t pos, plen, rlen
    cdef uint32_t i, nhere, nchild
    if rl < 8:
        return False
    nhere = rd32(route + 4)
    pos = 8
    here_at[0] = pos
    for i in range(nhere):
        if pos + 6 > rl:
            return False
        plen = rd16(route + pos + 4)
        pos += 6 + plen
        if pos > rl:
            return False
    if pos + 4 > rl:
        return False
    nchild = rd32(route + pos)
    pos += 4
    child_at[0] = pos
    for i in range(nchild):
        if pos + 2 > rl:
            return False
        plen = rd16(route + pos)
        pos += 2 + plen
        if pos + 4 > rl:
            return False
        rlen = rd32(route + pos)
        pos += 4 + rlen
        if pos > rl:
            return False
    return True


cdef void handle_cast(Fwd *f, char **fr, size_t *fl, int nf) noexcept nogil:
    """Forward one cast (frames ``fr``/``fl``): see the module docstring; with a
    gathering mode, open this call's gather and have the replies come here."""
    cdef const char *f0 = fr[0]
    cdef size_t n0 = fl[0], tl, po, rl, pos, dl, plen, rlen, hl, uplen, at, alen, chl
    cdef const char *tpl
    cdef const char *route
    cdef const char *data
    cdef uint32_t nhere, nchild, i, local
    cdef int mode, npc, j
    cdef long ntl
    cdef iovec *pc = f.pc
    cdef size_t *flen = f.flen
    cdef char *hdr = f.hbuf
    cdef char rank[4]
    cdef Dest *d
    cdef Rec *r
    cdef Gather *g = NULL
    cdef size_t here_at, child_at
    if n0 < HDR or f0[1] != 2:
        f.malformed += 1
        return
    tl = rd16(f0 + 2)
    po = rd16(f0 + 4)
    rl = rd32(f0 + 6)
    mode = <uint8_t>f0[10]
    at = rd16(f0 + 12)
    alen = rd16(f0 + 14)
    uplen = rd16(f0 + 24)
    hl = HDR + uplen
    if hl + tl + rl > n0 or (po != 0xFFFF and po + 4 > tl) or mode > M_TURN or \
            uplen >= MAX_PATH or (mode != M_NONE and uplen == 0):
        f.malformed += 1
        return
    tpl = f0 + hl
    route = tpl + tl
    data = route + rl
    dl = n0 - hl - tl - rl
    if not route_ok(route, rl, &here_at, &child_at):     # whole before anything is sent
        f.malformed += 1
        return
    nhere = rd32(route + 4)
    nchild = rd32(route + child_at - 4)
    if mode != M_NONE:
        # Gather here: the actors get this inbox as their reply address; a gather
        # that cannot be had (no memory, an address pickle cannot hold) leaves this
        # subtree answering the caller directly, as without gathering.
        ntl = patch_template(f, tpl, tl, at, alen, &po)
        d = dest_for(f, f0 + HDR, uplen)
        if ntl >= 0 and d != NULL:
            g = gather_open(f, rd64(f0 + 16), rd32(route), mode, d, f0[11] != 0)
        if g != NULL:
            tpl, tl = f.tbuf, <size_t>ntl
        else:
            po = rd16(f0 + 4)
            mode = M_NONE
    # The forwarders below: the same message with each one's route, and this inbox
    # as their way up.
    memcpy(hdr, f0, HDR)
    hdr[10] = <char>mode
    if mode != M_NONE:
        hdr[11] = 1
        hdr[24] = <char>(f.plen & 0xFF)
        hdr[25] = <char>(f.plen >> 8)
        memcpy(hdr + HDR, f.path, f.plen)
        chl = HDR + f.plen
    else:
        hdr[24] = hdr[25] = 0
        chl = HDR
    pos = child_at
    for i in range(nchild):
        plen = rd16(route + pos)
        d = dest_for(f, route + pos + 2, plen)
        pos += 2 + plen
        rlen = rd32(route + pos)
        pos += 4
        wr32(hdr + 6, <uint32_t>rlen)
        pc[0].iov_base = hdr
        pc[0].iov_len = chl
        pc[1].iov_base = <void *>(f0 + hl)          # the template as it came
        pc[1].iov_len = rd16(f0 + 2)
        pc[2].iov_base = <void *>(route + pos)
        pc[2].iov_len = rlen
        pc[3].iov_base = <void *>data
        pc[3].iov_len = dl
        flen[0] = chl + pc[1].iov_len + rlen + dl
        npc = 4
        for j in range(1, nf):
            pc[npc].iov_base = fr[j]
            pc[npc].iov_len = fl[j]
            flen[j] = fl[j]
            npc += 1
        pos += rlen
        if d == NULL:
            f.dropped += 1
            continue
        r = build_rec(pc, npc, flen, nf)
        if r == NULL:
            f.dropped += 1
            continue
        dest_send(f, d, r)
        f.forwarded += 1
    # The actors this proc delivers to: the template with their rank, the payload.
    pos = here_at
    for i in range(nhere):
        local = rd32(route + pos)
        plen = rd16(route + pos + 4)
        d = dest_for(f, route + pos + 6, plen)
        pos += 6 + plen
        wr32(rank, local)
        if po == 0xFFFF:
            pc[0].iov_base = <void *>tpl
            pc[0].iov_len = tl
            npc = 1
        else:
            pc[0].iov_base = <void *>tpl
            pc[0].iov_len = po
            pc[1].iov_base = rank
            pc[1].iov_len = 4
            pc[2].iov_base = <void *>(tpl + po + 4)
            pc[2].iov_len = tl - po - 4
            npc = 3
        pc[npc].iov_base = <void *>data
        pc[npc].iov_len = dl
        npc += 1
        flen[0] = tl + dl
        for j in range(1, nf):
            pc[npc].iov_base = fr[j]
            pc[npc].iov_len = fl[j]
            flen[j] = fl[j]
            npc += 1
        if d == NULL:
            f.dropped += 1
            continue
        r = build_rec(pc, npc, flen, nf)
        if r == NULL:
            f.dropped += 1
            continue
        dest_send(f, d, r)
        f.delivered += 1


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


cdef void *run(void *arg) noexcept nogil:
    """The thread: epoll over the listener, the connections, the backlogs and the
    stop eventfd, until stopped."""
    cdef Fwd *f = <Fwd *>arg
    cdef epoll_event evs[64]
    cdef int n, i, tag, fd, ms
    cdef double t, nxt, wait
    cdef uint64_t v
    cdef Dest *d
    while not f.stop:
        t = now()
        nxt = -1
        for i in range(f.ndests):                 # retries due, and the next one
            d = f.dests[i]
            if d.retry_at != 0:
                if d.retry_at <= t:
                    d.retry_at = 0
                    dest_flush(f, d)
                if d.retry_at != 0 and (nxt < 0 or d.retry_at < nxt):
                    nxt = d.retry_at
        for i in range(f.nconns):                 # proofs overdue
            if f.conns[i].state == 1:
                if f.conns[i].deadline <= t:
                    f.refused += 1
                    conn_close(f, i)
                elif nxt < 0 or f.conns[i].deadline < nxt:
                    nxt = f.conns[i].deadline
        if nxt < 0:
            ms = -1
        else:
            wait = nxt - t
            ms = 0 if wait <= 0 else <int>(wait * 1000) + 1
        n = epoll_wait(f.ep, evs, 64, ms)
        for i in range(n):
            tag = <int>(evs[i].data.u64 >> 32)
            fd = <int><uint32_t>evs[i].data.u64
            if tag == T_LISTEN:
                do_accept(f)
            elif tag == T_WAKE:
                read(f.efd, &v, 8)
                f.stop = True
            elif tag == T_CONN:
                conn_read(f, fd)
            elif tag == T_DEST and fd < f.ndests:
                dest_flush(f, f.dests[fd])
        if f.dirty != NULL:
            flush_dirty(f)
    linger(f)
    return NULL


cdef bint backlogged(Fwd *f) noexcept nogil:
    cdef int i
    for i in range(f.ndests):
        if f.dests[i].head != NULL:
            return True
    return False


cdef void linger(Fwd *f) noexcept nogil:
    """Stopping: send what waits in the backlogs for up to ``f.linger`` seconds
    (destinations that take it; nothing new is read)."""
    cdef double end = now() + f.linger
    cdef epoll_event evs[64]
    cdef int n, i, tag, fd, ms
    cdef double t
    while backlogged(f):
        t = now()
        if t >= end:
            return
        for i in range(f.ndests):
            if f.dests[i].retry_at != 0 and f.dests[i].retry_at <= t:
                f.dests[i].retry_at = 0
                dest_flush(f, f.dests[i])
        ms = <int>((end - t) * 1000) + 1
        n = epoll_wait(f.ep, evs, 64, 1 if ms > 1 else ms)
        for i in range(n):
            tag = <int>(evs[i].data.u64 >> 32)
            fd = <int><uint32_t>evs[i].data.u64
            if tag == T_DEST and fd < f.ndests:
                dest_flush(f, f.dests[fd])


cdef class Forwarder:
    """The nogil forwarding thread of one fan-out inbox (module docstring).

    Takes ``listen_fd`` (a bound, listening, non-blocking seqpacket socket; it stays
    the caller's to close after :meth:`close`), the inbox's ``path`` and
    ``incarnation`` (what its proofs name), the job ``secret`` and the auth timeout in
    seconds, and starts the thread.  :meth:`close` stops and joins it and frees its
    connections and backlogs (what was queued is dropped).  Not thread-safe itself:
    one owner calls :meth:`close`; :meth:`stats` may be read from any thread."""

    cdef Fwd *f
    cdef object thread       # a Python thread that runs the C loop without the GIL
    cdef bint running

    def __cinit__(self, int listen_fd, bytes path, bytes incarnation, bytes secret,
                  double auth_timeout):
        cdef epoll_event ev
        if len(path) >= MAX_PATH or len(incarnation) >= 128 or len(secret) > 64:
            raise ValueError("Forwarder: path, incarnation or secret too long")
        cdef Fwd *f = <Fwd *>calloc(1, sizeof(Fwd))
        if f == NULL:
            raise MemoryError()
        self.f = f
        f.lfd = listen_fd
        f.ep = -1
        f.efd = -1
        memcpy(f.path, <char *>path, len(path))
        f.plen = len(path)
        memcpy(f.inc, <char *>incarnation, len(incarnation))
        f.inclen = len(incarnation)
        memcpy(f.secret, <char *>secret, len(secret))
        f.slen = len(secret)
        f.auth_timeout = auth_timeout if auth_timeout > 0 else 1e9
        f.rbuf = <char *>malloc(MAX_RECORD + 64)
        f.pc = <iovec *>malloc((MAX_FRAMES + 4) * sizeof(iovec))   # pages touched
        f.flen = <size_t *>malloc(MAX_FRAMES * sizeof(size_t))     # only as used
        f.fr = <char **>malloc(MAX_FRAMES * sizeof(char *))
        f.fl = <size_t *>malloc(MAX_FRAMES * sizeof(size_t))
        f.tbuf = <char *>malloc(2 + 0x7FFF + MAX_PATH + 16)
        f.hbuf = <char *>malloc(HDR + MAX_PATH)
        f.ep = epoll_create1(EPOLL_CLOEXEC)
        f.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        if f.rbuf == NULL or f.pc == NULL or f.flen == NULL or f.fr == NULL or \
                f.fl == NULL or f.tbuf == NULL or f.hbuf == NULL or f.ep < 0 or f.efd < 0:
            self._free()
            raise OSError(errno, "Forwarder: cannot set up")
        ev.events = EPOLLIN
        ev.data.u64 = <uint64_t>T_LISTEN << 32
        epoll_ctl(f.ep, EPOLL_CTL_ADD, listen_fd, &ev)
        ev.data.u64 = <uint64_t>T_WAKE << 32
        epoll_ctl(f.ep, EPOLL_CTL_ADD, f.efd, &ev)
        # A Python thread (pthread_create's glibc symbol is newer than the wheels'
        # baseline) that gives up the GIL at once and for good: the loop is C.
        import threading
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name="monarch_cy-fanout")
        try:
            self.thread.start()
        except RuntimeError:
            self._free()
            raise OSError("Forwarder: cannot start its thread")
        self.running = True

    def _loop(self):
        cdef Fwd *f = self.f
        with nogil:
            run(<void *>f)

    def close(self, double linger_s=0.0):
        """Stop the thread (it first sends what its backlogs hold, for up to
        ``linger_s`` seconds; the rest is dropped), join it and free everything.
        Idempotent."""
        cdef uint64_t one = 1
        if self.running:
            self.f.linger = linger_s
            write(self.f.efd, &one, 8)
            self.thread.join()          # releases the GIL while it waits
            self.running = False
        self._free()

    cdef void _free(self):
        cdef int i
        cdef Fwd *f = self.f
        if f == NULL:
            return
        for i in range(f.ndests):
            dest_drop(f, f.dests[i])
            free(f.dests[i])
        free(f.dests)
        for i in range(f.nconns):
            if f.conns[i].state:
                close(i)
        free(f.conns)
        free(f.nonces)
        free(f.rbuf)
        free(f.pc)
        free(f.flen)
        free(f.fr)
        free(f.fl)
        free(f.tbuf)
        free(f.hbuf)
        gather_free_all(f)
        if f.ep >= 0:
            close(f.ep)
        if f.efd >= 0:
            close(f.efd)
        free(f)
        self.f = NULL

    def stats(self) -> dict:
        """Counters since start: messages received, forwarded (to forwarders
        below), delivered (to actors), dropped, refused connections, malformed
        messages, spilled messages received; replies gathered (taken by a gather),
        batches sent up, stray replies (for no gather here) and the gathers open now
        (read without a lock: a snapshot)."""
        cdef Fwd *f = self.f
        if f == NULL:
            return {}
        return dict(received=f.received, forwarded=f.forwarded, delivered=f.delivered,
                    dropped=f.dropped, refused=f.refused, malformed=f.malformed,
                    spilled=f.spilled, gathered=f.gathered, batched=f.batched,
                    stray=f.stray, gathers=f.gn)

    def __dealloc__(self):
        if self.f != NULL:
            self.close()


def hmac_sha256(bytes key, bytes msg) -> bytes:
    """HMAC-SHA256 as the forwarder computes it (tests compare it with hashlib)."""
    cdef unsigned char out[32]
    cdef const void *parts[1]
    cdef size_t lens[1]
    if len(key) > 64:
        raise ValueError("key longer than 64 bytes")
    parts[0] = <const char *>msg
    lens[0] = len(msg)
    mcy_hmac_sha256(<const unsigned char *>key, len(key), parts, lens, 1, out)
    return bytes(out[:32])
