# Included by _fanout.pyx (one compilation unit with the forwarder's thread).
#
# One message: a cast passed on to the forwarders below and delivered to the actors
# (with a gathering mode, this inbox named as their reply address), or what comes
# back up (_fanout_gather.pxi).

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
    cdef int mode, npc
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
        npc = add_frames(f, npc, fr, fl, 1, nf)
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
        npc = add_frames(f, npc, fr, fl, 1, nf)
        if d == NULL:
            f.dropped += 1
            continue
        r = build_rec(pc, npc, flen, nf)
        if r == NULL:
            f.dropped += 1
            continue
        dest_send(f, d, r)
        f.delivered += 1
