"""Asking a buffer's owner: one request to its service and the wait for the answer.

The service (:mod:`._owner`) answers every request on the requester's reply port
with ``(tag, value)``, or with the exception the request raised.  :func:`request`
is one such round trip (``drop``, ``check``, ``qp``); the TCP backend (:mod:`._tcp`)
keeps several chunk requests in flight and waits for each answer with
:func:`wait_answer`.

Blocking; one deadline bounds the wait.  The owner's death wakes it with
``OwnerDiedError`` (see :mod:`._watch`).
"""

from __future__ import annotations

import time

from monarch_cy._errors import RDMATimeoutError
from monarch_cy._rdma_buffer import _watch

__all__ = ["request", "wait_answer"]


def wait_answer(recv, deadline: float, what: str):
    """The next answer on ``recv`` (``(tag, value)``); ``RDMATimeoutError`` past
    ``deadline``, the owner's exception if the request failed."""
    left = deadline - time.monotonic()
    try:
        return recv.recv().get(timeout=max(0.0, left))
    except TimeoutError:
        raise RDMATimeoutError(f"{what} did not complete within its timeout") from None


def request(h, op: str, args: tuple, timeout: float):
    """One request/answer round trip to the owner's service (drop, check, qp)."""
    from monarch_cy.actor import Channel
    port, recv = Channel.open()
    try:
        with _watch.watching(h, recv):
            h.service.send((op, *args, port, 0))
            return wait_answer(recv, time.monotonic() + timeout, f"rdma {op} request")[1]
    finally:
        recv.close()
