# cython: language_level=3
"""Host memory seen through the buffer protocol, with lifetimes that cannot dangle.

Two small tools used by the owning tiers:

* :class:`HostRegion` exports raw host memory (pinned buffers, shared-memory
  segments) as a buffer.  It counts live exports; :meth:`HostRegion.release`
  refuses (``BufferError``) while any memoryview, numpy array or tensor made
  from it is alive, so the owner can never free memory still in use.
* :class:`BufferPin` holds another object's buffer (numpy, bytearray, torch CPU
  tensor via numpy, mmap) and gives its address.  While pinned, the exporter
  cannot resize or free it; :meth:`BufferPin.release` lets go.
"""

from cpython.buffer cimport (
    PyBUF_ANY_CONTIGUOUS,
    PyBUF_WRITABLE,
    PyBuffer_FillInfo,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from libc.stdint cimport uintptr_t


cdef class HostRegion:
    """``nbytes`` of host memory at ``address``, exported as a 1-D byte buffer.

    The region does not own the memory: whoever made it frees it, after
    :meth:`release` succeeded.  ``readonly`` regions refuse writable exports.
    """

    cdef uintptr_t _address
    cdef Py_ssize_t _nbytes
    cdef bint _readonly
    cdef bint _released
    cdef Py_ssize_t _exports

    def __cinit__(self, address, nbytes, bint readonly=False):
        if address is None or address <= 0:
            raise ValueError(f"address must be a positive int, got {address!r}")
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes!r}")
        self._address = address
        self._nbytes = nbytes
        self._readonly = readonly
        self._released = False
        self._exports = 0

    @property
    def address(self):
        return self._address

    @property
    def nbytes(self):
        return self._nbytes

    @property
    def exports(self):
        """How many buffer exports are alive now."""
        return self._exports

    @property
    def released(self):
        return self._released

    def release(self):
        """Stop exporting; idempotent.  ``BufferError`` while exports are alive."""
        if self._released:
            return
        if self._exports:
            raise BufferError(
                f"cannot release host memory at {self._address:#x}: "
                f"{self._exports} buffer export(s) still alive"
            )
        self._released = True

    def __getbuffer__(self, Py_buffer *view, int flags):
        if self._released:
            raise ValueError("host memory region is closed")
        PyBuffer_FillInfo(view, self, <void*>self._address, self._nbytes, self._readonly, flags)
        self._exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self._exports -= 1

    def __len__(self):
        return self._nbytes


cdef class BufferPin:
    """Hold ``obj``'s contiguous buffer and expose its address and size.

    ``writable=True`` asks for a writable buffer (a ``bytes`` object then fails
    with ``TypeError``/``BufferError`` from its exporter).
    """

    cdef Py_buffer _view
    cdef bint _held
    cdef object _obj

    def __cinit__(self, obj, bint writable=False):
        cdef int flags = PyBUF_ANY_CONTIGUOUS
        if writable:
            flags |= PyBUF_WRITABLE
        self._held = False
        PyObject_GetBuffer(obj, &self._view, flags)
        self._held = True
        self._obj = obj

    @property
    def address(self):
        if not self._held:
            raise ValueError("buffer pin is released")
        return <uintptr_t>self._view.buf

    @property
    def nbytes(self):
        if not self._held:
            raise ValueError("buffer pin is released")
        return self._view.len

    @property
    def readonly(self):
        return bool(self._view.readonly)

    @property
    def obj(self):
        return self._obj

    def release(self):
        """Let the exporter go; idempotent."""
        if self._held:
            self._held = False
            PyBuffer_Release(&self._view)
            self._obj = None

    def __dealloc__(self):
        if self._held:
            PyBuffer_Release(&self._view)
