# cython: language_level=3
"""The two system calls of the ``unix://`` transport's hot path, made from C.

Why not ``socket.recvmsg_into`` and ``socket.sendmsg``: each call builds Python
objects the transport throws away (the ancillary list, the peer address, a result
tuple, an iovec list checked item by item), and "nothing to read" or "no room" is
reported by raising ``BlockingIOError``.  An actor's thread makes two receives and one
send per call, a forwarder's pump one receive per reply, and with a thousand procs on
two cores that interpreter work, run with cold caches in every woken process, is what
a cast costs (bench/RESULTS.md).  These functions return plain ints: the record's
length, or ``-errno``; they never raise for a socket's state.

Both are non-blocking (``MSG_DONTWAIT``) and keep the GIL: neither can wait, and a
short call that released it would invite a GIL hand-off per message.  Received file
descriptors are close-on-exec (``MSG_CMSG_CLOEXEC``) and owned by the caller.
Sending never raises ``SIGPIPE`` (``MSG_NOSIGNAL``: a gone peer is ``-EPIPE``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.errno cimport errno, EINTR
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

__all__ = ["recv_into", "send_bufs", "MAX_FDS"]

from monarch_cy._transport._sockets cimport (
    CMSG_DATA, CMSG_FIRSTHDR, CMSG_LEN, CMSG_NXTHDR, CMSG_SPACE, MSG_CMSG_CLOEXEC,
    MSG_CTRUNC, MSG_DONTWAIT, MSG_NOSIGNAL, MSG_TRUNC, SCM_RIGHTS, SOL_SOCKET, cmsghdr,
    iovec, msghdr, recvmsg, sendmsg, socklen_t)

cdef extern from "<errno.h>":
    int EMSGSIZE, EINVAL

MAX_FDS = 4                       # descriptors one record may carry (the transport's: 1)
DEF _CTL = 64                     # >= CMSG_SPACE(4 * sizeof(int)), 8-byte aligned
DEF _STACK_IOV = 8


cdef union _Control:              # aligned for cmsghdr
    char buf[_CTL]
    cmsghdr align


def recv_into(int fd, buf, list fds):
    """Receive one record from the seqpacket socket ``fd`` into ``buf`` (a writable
    buffer) without blocking.

    Returns its length (0 with nothing appended to ``fds``: the peer closed), or
    ``-errno``: ``-EAGAIN`` when nothing is waiting, ``-EMSGSIZE`` when the record or
    its descriptors did not fit (``buf`` holds a truncated record: never use it).
    Descriptors passed with the record are appended to ``fds``, also on
    ``-EMSGSIZE``; the caller closes them."""
    cdef Py_buffer view
    cdef msghdr msg
    cdef iovec iov
    cdef _Control ctl
    cdef ssize_t n
    cdef cmsghdr *c
    cdef int *p
    cdef size_t i, k
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        memset(&msg, 0, sizeof(msg))
        iov.iov_base = view.buf
        iov.iov_len = <size_t>view.len
        msg.msg_iov = &iov
        msg.msg_iovlen = 1
        msg.msg_control = ctl.buf
        msg.msg_controllen = CMSG_SPACE(MAX_FDS * sizeof(int))
        while True:
            n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)
            if n >= 0 or errno != EINTR:
                break
        if n < 0:
            return -errno
        if msg.msg_controllen:
            c = CMSG_FIRSTHDR(&msg)
            while c != NULL:
                if c.cmsg_level == SOL_SOCKET and c.cmsg_type == SCM_RIGHTS \
                        and c.cmsg_len >= CMSG_LEN(0):
                    k = (c.cmsg_len - CMSG_LEN(0)) // sizeof(int)
                    p = <int *>CMSG_DATA(c)
                    for i in range(k):
                        fds.append(p[i])
                c = CMSG_NXTHDR(&msg, c)
        if msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC):
            return -EMSGSIZE
        return n
    finally:
        PyBuffer_Release(&view)


def send_bufs(int fd, list bufs, int mfd=-1):
    """Send ``bufs`` (objects with the buffer protocol) as one record on the
    seqpacket socket ``fd`` without blocking, with the descriptor ``mfd`` attached
    when it is not -1 (it stays the caller's).

    Returns 0 when the record left whole (seqpacket sends are all or nothing), else
    ``-errno``: ``-EAGAIN`` when the socket has no room now, ``-EPIPE`` or
    ``-ECONNRESET`` when the peer is gone, ``-EMSGSIZE`` when the record is larger
    than the socket takes."""
    cdef Py_ssize_t nb = PyList_GET_SIZE(bufs)
    cdef Py_buffer stack_views[_STACK_IOV]
    cdef iovec stack_iov[_STACK_IOV]
    cdef Py_buffer *views = stack_views
    cdef iovec *iov = stack_iov
    cdef Py_ssize_t got = 0, i
    cdef msghdr msg
    cdef _Control ctl
    cdef cmsghdr *c
    cdef ssize_t n
    if nb > _STACK_IOV:
        views = <Py_buffer *>malloc(nb * sizeof(Py_buffer))
        iov = <iovec *>malloc(nb * sizeof(iovec))
        if views == NULL or iov == NULL:
            free(views)
            free(iov)
            raise MemoryError()
    try:
        for i in range(nb):
            PyObject_GetBuffer(<object>PyList_GET_ITEM(bufs, i), &views[i], PyBUF_SIMPLE)
            got += 1
            iov[i].iov_base = views[i].buf
            iov[i].iov_len = <size_t>views[i].len
        memset(&msg, 0, sizeof(msg))
        msg.msg_iov = iov
        msg.msg_iovlen = <size_t>nb
        if mfd != -1:
            memset(ctl.buf, 0, _CTL)
            msg.msg_control = ctl.buf
            msg.msg_controllen = CMSG_SPACE(sizeof(int))
            c = CMSG_FIRSTHDR(&msg)
            c.cmsg_level = SOL_SOCKET
            c.cmsg_type = SCM_RIGHTS
            c.cmsg_len = CMSG_LEN(sizeof(int))
            memcpy(CMSG_DATA(c), &mfd, sizeof(int))
        while True:
            n = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL)
            if n >= 0 or errno != EINTR:
                break
        if n < 0:
            return -errno
        return 0
    finally:
        for i in range(got):
            PyBuffer_Release(&views[i])
        if views != stack_views:
            free(views)
            free(iov)
