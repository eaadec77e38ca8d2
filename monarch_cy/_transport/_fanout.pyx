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

The parts, included here (one compilation unit, one thread): ``_fanout_send.pxi``
(connections out, backlogs, retries), ``_fanout_recv.pxi`` (accepting, proofs,
records), ``_fanout_cast.pxi`` (a cast passed on and delivered) and
``_fanout_gather.pxi`` (the replies on their way back).

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


include "_fanout_send.pxi"
include "_fanout_gather.pxi"
include "_fanout_cast.pxi"
include "_fanout_recv.pxi"


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
