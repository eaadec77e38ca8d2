# Included by _fanout.pyx (one compilation unit: the gathering shares the forwarder's
# thread, its destinations and its backlogs).
#
# Reply gathering: the nogil forwarder's part of the way back.
#
# A fan-out message whose mode is WHOLE or PER_TURN asks this forwarder to gather the
# replies of its subtree: the actors it delivers to are given a call header whose
# reply address is this fan-out inbox (the template's pickled reply address is
# rewritten, see ``patch_template``), and the forwarders below are told to send their
# gathered replies here.  The forwarder keeps one *gather* per call (keyed by the
# call's port id, unique per controller: only the controller casts down trees) with
# the number of replies still due from below, and sends up:
#
# * WHOLE (``call``, ``Accumulator``): one batch once every rank below answered; an
#   error at once and alone (the call fails with it; later replies are dropped here);
# * PER_TURN (``stream``): what arrived during one turn of the loop, as one batch;
# * in both, a reply with extra frames (large buffers) at once, alone, untouched.
#
# Up is either the forwarder above (raw batches, ``0xFC``) or, at a head, the
# controller's node inbox, which gets exactly what a Python relay would send it: a
# pickled ``(REPLY_BATCH, port)`` header and a pickled ``[(rank, ok, bytes)]`` list,
# or a pickled ``(REPLY, port, rank, ok)`` header before a lone reply.  The pickles are
# written here opcode by opcode (protocol 5: PROTO, ints as BININT/LONG1, bytes as
# SHORT_BINBYTES/BINBYTES, MARK/TUPLE, EMPTY_LIST/APPENDS; no frame, no memo), so no
# Python object is touched.  Nothing received is unpickled here.
#
# What arrives (after the connection's proof, as every record here):
#   0xFB | u8 ok | u32 rank | u64 port | value       an actor's reply (node.reply)
#   0xFC | u8 0  | u32 count | u64 port | entries    a forwarder below's batch
#        entries: count x (u32 rank | u8 ok | u32 len | value)
#   0xFD | u8 0  | u32 0 | u64 port | node message   passed up as it is (an actor's
#        UNDELIVERABLE notice, which must reach the caller before its error reply)
#
# A gather whose subtree lost a proc never completes: it stays until this proc exits
# (the controller fails those ranks itself), as the Python relays do.

DEF M_NONE = 0
DEF M_WHOLE = 1
DEF M_TURN = 2
DEF REPLY_MAGIC = 0xFB
DEF BATCH_MAGIC = 0xFC
DEF PASS_MAGIC = 0xFD
DEF RHDR = 14                    # the header of 0xFB/0xFC/0xFD messages
DEF ENTRY = 9                    # u32 rank | u8 ok | u32 len
DEF K_REPLY = 0                  # protocol.REPLY
DEF K_REPLY_BATCH = 25           # protocol.REPLY_BATCH
DEF SCHEME_LEN = 7               # "unix://"

KINDS = (K_REPLY, K_REPLY_BATCH)  # checked against protocol's by the tests


cdef struct Gather:
    Gather *next                  # hash chain
    Gather *dnext                 # the dirty list (PER_TURN, something to send)
    uint64_t port
    long left                     # replies still due from below
    int mode
    bint failed                   # WHOLE: an error went up; the rest is dropped
    bint dirty
    bint upfan                    # up is a forwarder (raw) or the controller (pickles)
    Dest *up
    char *buf                     # entries waiting to go up
    size_t len, cap
    uint32_t count


cdef inline uint64_t rd64(const char *p) noexcept nogil:
    return <uint64_t>rd32(p) | (<uint64_t>rd32(p + 4)) << 32


cdef inline void wr64(char *p, uint64_t v) noexcept nogil:
    wr32(p, <uint32_t>v)
    wr32(p + 4, <uint32_t>(v >> 32))


cdef inline size_t gslot(Fwd *f, uint64_t port) noexcept nogil:
    return <size_t>((port * <uint64_t>0x9E3779B97F4A7C15) >> 40) & (f.gcap - 1)


cdef Gather *gather_find(Fwd *f, uint64_t port) noexcept nogil:
    cdef Gather *g
    if f.gcap == 0:
        return NULL
    g = f.gt[gslot(f, port)]
    while g != NULL and g.port != port:
        g = g.next
    return g


cdef bint gather_grow(Fwd *f) noexcept nogil:
    cdef size_t oldcap = f.gcap, cap = oldcap * 2 if oldcap else 1024, i
    cdef Gather **old = f.gt
    cdef Gather *g
    cdef Gather *nx
    cdef Gather **t = <Gather **>calloc(cap, sizeof(Gather *))
    if t == NULL:
        return False
    f.gt, f.gcap = t, cap
    for i in range(oldcap):
        g = old[i]
        while g != NULL:
            nx = g.next
            g.next = t[gslot(f, g.port)]
            t[gslot(f, g.port)] = g
            g = nx
    free(old)
    return True


cdef Gather *gather_open(Fwd *f, uint64_t port, long count, int mode, Dest *up,
                         bint upfan) noexcept nogil:
    """The gather of call ``port`` (``count`` more replies due); NULL when out of
    memory.  A second message of the same call adds its count."""
    cdef Gather *g = gather_find(f, port)
    cdef size_t s
    if g != NULL:
        g.left += count
        return g
    if f.gn >= f.gcap and not gather_grow(f):
        return NULL
    g = <Gather *>calloc(1, sizeof(Gather))
    if g == NULL:
        return NULL
    g.port, g.left, g.mode, g.up, g.upfan = port, count, mode, up, upfan
    s = gslot(f, port)
    g.next = f.gt[s]
    f.gt[s] = g
    f.gn += 1
    return g


cdef void gather_free(Fwd *f, Gather *g) noexcept nogil:
    cdef Gather **pp = &f.gt[gslot(f, g.port)]
    while pp[0] != NULL and pp[0] != g:
        pp = &pp[0].next
    if pp[0] == g:
        pp[0] = g.next
        f.gn -= 1
    free(g.buf)
    free(g)


cdef void gather_free_all(Fwd *f) noexcept nogil:
    cdef size_t i
    cdef Gather *g
    for i in range(f.gcap):
        while f.gt[i] != NULL:
            g = f.gt[i]
            f.gt[i] = g.next
            free(g.buf)
            free(g)
    free(f.gt)
    f.gt, f.gcap, f.gn, f.dirty = NULL, 0, 0, NULL


cdef bint gather_reserve(Gather *g, size_t more) noexcept nogil:
    cdef size_t cap
    cdef char *grown
    if g.len + more <= g.cap:
        return True
    cap = g.cap * 2 if g.cap else 4096
    while cap < g.len + more:
        cap *= 2
    grown = <char *>realloc(g.buf, cap)
    if grown == NULL:
        return False
    g.buf, g.cap = grown, cap
    return True


# -- sending up --------------------------------------------------------------------------
cdef void send_up(Fwd *f, Gather *g, iovec *pc, int npc, size_t *flen, int nf) noexcept nogil:
    cdef Rec *r = build_rec(pc, npc, flen, nf)
    if r == NULL:
        f.dropped += 1
        return
    dest_send(f, g.up, r)


cdef size_t put_int(char *p, uint64_t v) noexcept nogil:
    """A non-negative int as pickle writes it: BININT below 2**31, else LONG1 of 8
    bytes (positive below 2**63); the bytes written."""
    if v < <uint64_t>0x80000000UL:
        p[0] = b'J'
        wr32(p + 1, <uint32_t>v)
        return 5
    p[0] = <char>0x8A
    p[1] = 8
    wr64(p + 2, v)
    return 10


cdef size_t put_bytes_op(char *p, size_t n) noexcept nogil:
    """The opcode and length of a ``bytes`` of ``n`` bytes (SHORT_BINBYTES or
    BINBYTES); the bytes written."""
    if n < 256:
        p[0] = b'C'
        p[1] = <char>n
        return 2
    p[0] = b'B'
    wr32(p + 1, <uint32_t>n)
    return 5


cdef void flush_batch(Fwd *f, Gather *g) noexcept nogil:
    """Send what ``g`` holds up as one batch (raw above a forwarder, the pickled
    ``REPLY_BATCH`` above the controller) and empty it."""
    cdef char hdr[RHDR + 2 + 16]
    cdef size_t size, pos, n, h
    cdef char *out
    cdef const char *e
    cdef uint32_t i
    if g.count == 0 or g.failed:
        g.len = g.count = 0
        return
    if g.upfan:
        hdr[0] = <char>BATCH_MAGIC
        hdr[1] = 0
        wr32(hdr + 2, g.count)
        wr64(hdr + 6, g.port)
        f.pc[0].iov_base, f.pc[0].iov_len = hdr, RHDR
        f.pc[1].iov_base, f.pc[1].iov_len = g.buf, g.len
        f.flen[0] = RHDR + g.len
        send_up(f, g, f.pc, 2, f.flen, 1)
    else:
        # u16 header length | (REPLY_BATCH, port) | [(rank, ok, value), ...]
        size = 2 + 16 + 6 + <size_t>g.count * 12 + g.len
        out = <char *>malloc(size)
        if out == NULL:
            f.dropped += g.count
            g.len = g.count = 0
            return
        pos = 2
        out[pos] = <char>0x80; out[pos + 1] = 5; pos += 2          # PROTO 5
        out[pos] = b'K'; out[pos + 1] = K_REPLY_BATCH; pos += 2     # kind
        pos += put_int(out + pos, g.port)
        out[pos] = <char>0x86; out[pos + 1] = b'.'; pos += 2       # TUPLE2, STOP
        h = pos - 2
        out[0] = <char>(h & 0xFF)
        out[1] = <char>(h >> 8)
        out[pos] = <char>0x80; out[pos + 1] = 5                     # PROTO 5
        out[pos + 2] = b']'; out[pos + 3] = b'('; pos += 4          # EMPTY_LIST, MARK
        e = g.buf
        for i in range(g.count):
            n = rd32(e + 5)
            pos += put_int(out + pos, rd32(e))
            out[pos] = <char>(0x88 if e[4] else 0x89); pos += 1    # NEWTRUE/NEWFALSE
            pos += put_bytes_op(out + pos, n)
            memcpy(out + pos, e + ENTRY, n)
            pos += n
            out[pos] = <char>0x87; pos += 1                         # TUPLE3
            e += ENTRY + n
        out[pos] = b'e'; out[pos + 1] = b'.'; pos += 2             # APPENDS, STOP
        f.pc[0].iov_base, f.pc[0].iov_len = out, pos
        f.flen[0] = pos
        send_up(f, g, f.pc, 1, f.flen, 1)
        free(out)
    f.batched += 1
    g.len = g.count = 0


cdef void send_alone(Fwd *f, Gather *g, char **fr, size_t *fl, int nf) noexcept nogil:
    """An actor's reply (``0xFB`` message ``fr``), up at once and untouched: as it
    is to a forwarder, behind a pickled ``(REPLY, port, rank, ok)`` to the
    controller."""
    cdef char hdr[2 + 32]
    cdef size_t pos = 2
    if g.upfan:
        send_up(f, g, f.pc, add_frames(f, 0, fr, fl, 0, nf), f.flen, nf)
        return
    hdr[pos] = <char>0x80; hdr[pos + 1] = 5; hdr[pos + 2] = b'('        # PROTO, MARK
    hdr[pos + 3] = b'K'; hdr[pos + 4] = K_REPLY; pos += 5
    pos += put_int(hdr + pos, g.port)
    pos += put_int(hdr + pos, rd32(fr[0] + 2))
    hdr[pos] = <char>(0x88 if fr[0][1] else 0x89)
    hdr[pos + 1] = b't'; hdr[pos + 2] = b'.'; pos += 3                  # TUPLE, STOP
    hdr[0] = <char>((pos - 2) & 0xFF)
    hdr[1] = 0
    f.pc[0].iov_base, f.pc[0].iov_len = hdr, pos
    f.pc[1].iov_base, f.pc[1].iov_len = fr[0] + RHDR, fl[0] - RHDR
    f.flen[0] = pos + fl[0] - RHDR
    send_up(f, g, f.pc, add_frames(f, 2, fr, fl, 1, nf), f.flen, nf)


cdef void gather_settle(Fwd *f, Gather *g) noexcept nogil:
    """After ``g`` took something: WHOLE sends its batch and ends once nothing is
    due; PER_TURN is flushed at the end of this turn (:func:`flush_dirty`)."""
    if g.mode == M_WHOLE:
        if g.left <= 0:
            flush_batch(f, g)
            gather_free(f, g)
    elif not g.dirty:
        g.dirty = True
        g.dnext = f.dirty
        f.dirty = g


cdef void flush_dirty(Fwd *f) noexcept nogil:
    """End of a turn: every PER_TURN gather sends what it took; those with nothing
    more due end."""
    cdef Gather *g
    while f.dirty != NULL:
        g = f.dirty
        f.dirty = g.dnext
        g.dirty = False
        flush_batch(f, g)
        if g.left <= 0:
            gather_free(f, g)


# -- what comes back up ------------------------------------------------------------------
cdef void on_reply(Fwd *f, char **fr, size_t *fl, int nf) noexcept nogil:
    """An actor's reply (``0xFB``)."""
    cdef Gather *g = gather_find(f, rd64(fr[0] + 6))
    cdef size_t n = fl[0] - RHDR
    cdef bint ok = fr[0][1] != 0
    if g == NULL:
        f.stray += 1
        return
    g.left -= 1
    f.gathered += 1
    if g.failed:
        pass                                        # the call failed: dropped
    elif nf > 1 or (g.mode == M_WHOLE and not ok):  # up alone, at once
        if g.mode == M_WHOLE and not ok:
            g.failed = True
            g.len = g.count = 0
        send_alone(f, g, fr, fl, nf)
    elif n > <size_t>0xFFFFFFFFUL or not gather_reserve(g, ENTRY + n):
        f.dropped += 1
    else:
        memcpy(g.buf + g.len, fr[0] + 2, 4)         # rank
        g.buf[g.len + 4] = <char>ok
        wr32(g.buf + g.len + 5, <uint32_t>n)
        memcpy(g.buf + g.len + ENTRY, fr[0] + RHDR, n)
        g.len += ENTRY + n
        g.count += 1
    gather_settle(f, g)


cdef void on_batch(Fwd *f, const char *m, size_t n) noexcept nogil:
    """A forwarder below's batch (``0xFC``): checked whole, then taken."""
    cdef uint32_t count = rd32(m + 2), i
    cdef size_t pos = RHDR, k
    cdef Gather *g
    for i in range(count):
        if pos + ENTRY > n:
            f.malformed += 1
            return
        k = rd32(m + pos + 5)
        pos += ENTRY + k
        if pos > n:
            f.malformed += 1
            return
    if pos != n:
        f.malformed += 1
        return
    g = gather_find(f, rd64(m + 6))
    if g == NULL:
        f.stray += 1
        return
    g.left -= count
    f.gathered += count
    if not g.failed:
        if gather_reserve(g, n - RHDR):
            memcpy(g.buf + g.len, m + RHDR, n - RHDR)
            g.len += n - RHDR
            g.count += count
        else:
            f.dropped += count
    gather_settle(f, g)


cdef void on_pass(Fwd *f, char **fr, size_t *fl, int nf) noexcept nogil:
    """A node message for the caller (``0xFD``), up in the order it came: as it is to
    a forwarder, unwrapped to the controller."""
    cdef Gather *g = gather_find(f, rd64(fr[0] + 6))
    if g == NULL:
        f.stray += 1
        return
    add_frames(f, 0, fr, fl, 0, nf)
    if not g.upfan:
        f.pc[0].iov_base = fr[0] + RHDR
        f.pc[0].iov_len = fl[0] - RHDR
        f.flen[0] = fl[0] - RHDR
    send_up(f, g, f.pc, nf, f.flen, nf)


cdef void on_up(Fwd *f, char **fr, size_t *fl, int nf) noexcept nogil:
    """Whatever comes back up (``0xFB``, ``0xFC``, ``0xFD``)."""
    cdef uint8_t kind = <uint8_t>fr[0][0]
    if fl[0] < RHDR or (kind == BATCH_MAGIC and nf != 1):
        f.malformed += 1
    elif kind == REPLY_MAGIC:
        on_reply(f, fr, fl, nf)
    elif kind == BATCH_MAGIC:
        on_batch(f, fr[0], fl[0])
    else:
        on_pass(f, fr, fl, nf)


# -- the call header the actors get --------------------------------------------------------
cdef long patch_template(Fwd *f, const char *tpl, size_t tl, size_t at, size_t alen,
                         size_t *po) noexcept nogil:
    """``tpl`` with its pickled reply address (``alen`` bytes at ``at``: the opcode,
    its length, the text) replaced by this inbox's address, into ``f.tbuf``: the
    u16 header length, the pickle's frame length and the rank's offset ``po`` follow.
    The new length, or -1 when it cannot be done (the caller does not gather)."""
    cdef size_t L = SCHEME_LEN + f.plen, nl
    cdef long delta = <long>(2 + L) - <long>alen
    cdef char *t = f.tbuf
    cdef uint16_t hl
    if L > 255 or at < 2 or alen < 2 or at + alen > tl or \
            <uint8_t>tpl[at] != 0x8C or <size_t>(<uint8_t>tpl[at + 1]) + 2 != alen or \
            (po[0] != 0xFFFF and po[0] < at + alen and po[0] + 4 > at):
        return -1
    nl = <size_t>(<long>tl + delta)
    hl = rd16(tpl)
    if nl > 2 + 0x7FFF or <long>hl + delta != <long>nl - 2:
        return -1
    memcpy(t, tpl, at)
    t[at] = <char>0x8C
    t[at + 1] = <char>L
    memcpy(t + at + 2, b"unix://", SCHEME_LEN)
    memcpy(t + at + 2 + SCHEME_LEN, f.path, f.plen)
    memcpy(t + at + 2 + L, tpl + at + alen, tl - at - alen)
    t[0] = <char>((nl - 2) & 0xFF)
    t[1] = <char>((nl - 2) >> 8)
    if nl >= 13 and <uint8_t>t[2] == 0x80 and <uint8_t>t[4] == 0x95:   # FRAME
        wr64(t + 5, <uint64_t>(<long>rd64(t + 5) + delta))
    if po[0] != 0xFFFF and po[0] > at:
        po[0] = <size_t>(<long>po[0] + delta)
    return <long>nl
