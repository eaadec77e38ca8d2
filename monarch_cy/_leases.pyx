# cython: language_level=3
"""Lease tables: 64-bit words in shared memory, claimed and released atomically.

A table is one ``mmap`` of a file descriptor (a memfd) that several processes map
``MAP_SHARED``.  It holds

* a header page: a magic word, the table's random 64-bit id, its sizes;
* ``nslots`` *lease slots*: 0 when free, else ``pid << 32 | (cell + 1)`` -- process
  ``pid`` holds a lease on ``cell``;
* ``ncells`` *cells*: one word each, a registration's token (non-zero while it is
  alive, 0 once dropped).

Every access is a sequentially consistent atomic (``__atomic_*`` builtins, which
are lock-free for aligned 8-byte words on the platforms we build for, and therefore
work across processes).  That gives the one property the owner relies on: in
:meth:`LeaseTable.claim` the slot is taken *before* the token is read, and the
owner clears the token *before* it scans the slots (:meth:`LeaseTable.holders`),
so either the claimer sees the cleared token or the owner sees the lease (the
store-load pattern of Dekker's algorithm; seq-cst forbids both missing).

:class:`LeasedView` exports ``nbytes`` at an address as a read-only buffer and
holds one lease slot, released when the view object is freed (when the last
memoryview or out-of-band frame made from it goes).

The mapping lives as long as the :class:`LeaseTable` object (unmapped when it is
freed, never explicitly), so a lease or view in use can never see it unmapped.
This module makes no policy: the callers (``monarch_cy._rdma_buffer._leases``)
decide what a cell is and how long to wait.
"""

cimport cython
from cpython.buffer cimport PyBuffer_FillInfo
from libc.errno cimport errno
from libc.stdint cimport uint64_t, uintptr_t
from posix.mman cimport MAP_FAILED, MAP_SHARED, PROT_READ, PROT_WRITE, mmap, munmap
from posix.unistd cimport close

cdef extern from "<poll.h>" nogil:
    cdef struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd* fds, unsigned long nfds, int timeout)
    enum:
        POLLIN

cdef extern from *:
    """
    #include <stdint.h>
    static inline uint64_t mcy_lease_load(uint64_t *p) {
        return __atomic_load_n(p, __ATOMIC_SEQ_CST);
    }
    static inline void mcy_lease_store(uint64_t *p, uint64_t v) {
        __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
    }
    static inline int mcy_lease_cas(uint64_t *p, uint64_t expected, uint64_t desired) {
        return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST,
                                           __ATOMIC_SEQ_CST);
    }
    static inline uint64_t mcy_lease_xchg(uint64_t *p, uint64_t v) {
        return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
    }
    """
    uint64_t mcy_lease_load(uint64_t* p) nogil
    void mcy_lease_store(uint64_t* p, uint64_t v) nogil
    bint mcy_lease_cas(uint64_t* p, uint64_t expected, uint64_t desired) nogil
    uint64_t mcy_lease_xchg(uint64_t* p, uint64_t v) nogil

MAGIC = 0x455341454c59434d          # b"MCYLEASE", little-endian
PAGE = 4096
CLAIMED = 0                          # claim(): >= 0 is the slot
DROPPED = -1                         # the cell's token is not the caller's
FULL = -2                            # every slot is taken
EXITED = -3                          # the table's pidfd says its owner exited


def table_bytes(size_t nslots, size_t ncells):
    """Size of the file a table of ``nslots`` slots and ``ncells`` cells maps."""
    return 4096 + _round(nslots * 8) + _round(ncells * 8)


cdef inline size_t _round(size_t n) nogil:
    return (n + 4095) // 4096 * 4096


cdef class LeaseTable:
    """One mapping of a lease table (module docstring).

    ``LeaseTable(fd, table_id, nslots, ncells, create=True)`` maps ``fd`` (sized with
    :func:`table_bytes` by the caller) and writes the header; ``create=False`` maps
    an existing table and raises ``ValueError`` unless its header holds ``table_id``
    and these sizes.  The fd is not kept (the caller may close it at once).
    ``pidfd`` (>= 0) is a pidfd of the table's owner, owned by this object from now
    on (closed when it is freed): :meth:`claim` refuses once it reads "exited".
    """

    cdef uint64_t* _base
    cdef uint64_t* _slots
    cdef uint64_t* _cells
    cdef size_t _len
    cdef readonly uint64_t table_id
    cdef readonly size_t nslots
    cdef readonly size_t ncells
    cdef int _pidfd

    def __cinit__(self, int fd, uint64_t table_id, size_t nslots, size_t ncells,
                  bint create=True, int pidfd=-1):
        self._base = NULL
        self._pidfd = -1
        if nslots == 0 or ncells == 0 or ncells >= 0xFFFFFFFF:
            raise ValueError(f"nslots and ncells must be in [1, 2**32 - 1), got {nslots}, "
                             f"{ncells}")
        self._len = table_bytes(nslots, ncells)
        cdef void* p = mmap(NULL, self._len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        if p == MAP_FAILED:
            import os
            err = errno
            raise OSError(err, f"cannot map a lease table of {self._len} bytes (fd {fd}): "
                               f"{os.strerror(err)}")
        self._base = <uint64_t*>p
        self._slots = <uint64_t*>(<char*>p + 4096)
        self._cells = <uint64_t*>(<char*>p + 4096 + _round(nslots * 8))
        self.nslots, self.ncells, self.table_id = nslots, ncells, table_id
        if create:
            self._base[1] = table_id
            self._base[2] = nslots
            self._base[3] = ncells
            mcy_lease_store(&self._base[0], MAGIC)
        elif (mcy_lease_load(&self._base[0]) != MAGIC or self._base[1] != table_id
              or self._base[2] != nslots or self._base[3] != ncells):
            raise ValueError(f"fd {fd} is not lease table {table_id:#x} ({nslots} slots, "
                             f"{ncells} cells)")
        self._pidfd = pidfd                  # adopted only once the table is good

    def __dealloc__(self):
        if self._base != NULL:
            munmap(self._base, self._len)
            self._base = NULL
        if self._pidfd >= 0:
            close(self._pidfd)
            self._pidfd = -1

    cdef inline size_t _cell(self, cell) except? 0:
        if not 0 <= cell < self.ncells:
            raise ValueError(f"cell must be in [0, {self.ncells}), got {cell!r}")
        return <size_t>cell

    cdef inline size_t _slot(self, slot) except? 0:
        if not 0 <= slot < self.nslots:
            raise ValueError(f"slot must be in [0, {self.nslots}), got {slot!r}")
        return <size_t>slot

    # -- cells (the owner writes, everyone reads) ------------------------------
    def set(self, cell, uint64_t token):
        mcy_lease_store(&self._cells[self._cell(cell)], token)

    def clear(self, cell):
        """Zero the cell; returns what it held."""
        return mcy_lease_xchg(&self._cells[self._cell(cell)], 0)

    def token(self, cell):
        return mcy_lease_load(&self._cells[self._cell(cell)])

    # -- slots -----------------------------------------------------------------
    def claim(self, cell, uint64_t token, uint64_t pid, uint64_t hint=0):
        """Take a free slot for ``pid`` on ``cell``, then check that the cell holds
        ``token``.  Returns the slot (>= 0), or ``DROPPED`` (token differs; nothing
        held), ``FULL`` (no free slot), ``EXITED`` (the owner exited; nothing held)."""
        cdef size_t c = self._cell(cell)
        cdef size_t i, j, n = self.nslots
        cdef size_t start
        cdef uint64_t mine
        if pid == 0 or pid >= 0x80000000:
            raise ValueError(f"pid must be in [1, 2**31), got {pid}")
        if self._exited():
            return EXITED
        mine = (pid << 32) | (c + 1)
        start = <size_t>(((hint ^ (pid * <uint64_t>0x9E3779B97F4A7C15)) >> 17) % n)
        for i in range(n):
            j = (start + i) % n
            if mcy_lease_cas(&self._slots[j], 0, mine):
                if mcy_lease_load(&self._cells[c]) != token:
                    mcy_lease_store(&self._slots[j], 0)
                    return DROPPED
                return <long>j
        return FULL

    def release(self, slot):
        mcy_lease_store(&self._slots[self._slot(slot)], 0)

    def holders(self, cell):
        """``[(slot, pid, value)]`` of the slots held on ``cell`` now."""
        cdef size_t c = self._cell(cell)
        cdef size_t i
        cdef uint64_t v
        out = []
        for i in range(self.nslots):
            v = mcy_lease_load(&self._slots[i])
            if v != 0 and (v & 0xFFFFFFFF) == c + 1:
                out.append((i, v >> 32, v))
        return out

    def reclaim(self, slot, uint64_t value):
        """Free ``slot`` if it still holds ``value`` (a dead holder's lease); True if so."""
        return mcy_lease_cas(&self._slots[self._slot(slot)], value, 0)

    def used_slots(self):
        """How many slots are held now (any cell)."""
        cdef size_t i, k = 0
        for i in range(self.nslots):
            if mcy_lease_load(&self._slots[i]) != 0:
                k += 1
        return k

    # -- the owner's liveness (readers) ------------------------------------------
    cdef bint _exited(self):
        cdef pollfd p
        if self._pidfd < 0:
            return False
        p.fd = self._pidfd
        p.events = POLLIN
        p.revents = 0
        return poll(&p, 1, 0) > 0

    def exited(self):
        """True once the owner's process has exited (False without a pidfd)."""
        return self._exited()


@cython.no_gc_clear
cdef class LeasedView:
    """``nbytes`` at ``address``, exported as read-only bytes, holding ``slot`` of
    ``table`` until this object is freed (then the slot is released)."""

    cdef LeaseTable _table
    cdef long _slot
    cdef uintptr_t _address
    cdef Py_ssize_t _nbytes

    def __cinit__(self, LeaseTable table, long slot, uintptr_t address, Py_ssize_t nbytes):
        self._table, self._slot = table, slot
        self._address, self._nbytes = address, nbytes

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, <void*>self._address, self._nbytes, 1, flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass

    def __len__(self):
        return self._nbytes

    def __dealloc__(self):
        if self._table is not None and self._slot >= 0:
            mcy_lease_store(&self._table._slots[self._slot], 0)
            self._slot = -1
