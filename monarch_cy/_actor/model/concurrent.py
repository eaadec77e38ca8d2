"""``@concurrent_endpoint``: an async endpoint whose body runs as a background task.

As in Monarch, an actor awaits each plain ``async def`` endpoint before it takes the
next message, and ``@concurrent_endpoint`` opts one async endpoint out of that: when
its turn comes its body starts as a task and the actor moves on to the next message
(see :class:`~.actor.Actor`).  It takes only ``async def`` methods, the same options as
``@endpoint``, and refuses to wrap an ``@endpoint``.
"""

from __future__ import annotations

from monarch_cy._actor.model.actor import _is_coroutine_fn
from monarch_cy._actor.model.endpoint import EndpointProperty, endpoint

__all__ = ["concurrent_endpoint"]


def concurrent_endpoint(method=None, *, explicit_response_port: bool = False, **options):
    """Mark an ``async def`` actor method as an endpoint that runs concurrently with
    the actor's other messages (start order = arrival order)."""
    if method is None:
        return lambda m: concurrent_endpoint(
            m, explicit_response_port=explicit_response_port, **options)
    if isinstance(method, EndpointProperty):
        raise ValueError("concurrent_endpoint does not wrap @endpoint; pass endpoint "
                         "options to @concurrent_endpoint instead")
    if not _is_coroutine_fn(method):
        raise ValueError(f"concurrent_endpoint can only wrap async endpoints; "
                         f"{getattr(method, '__qualname__', method)!r} is not async def")
    prop = endpoint(method, explicit_response_port=explicit_response_port, **options)
    prop._concurrent = True
    return prop
