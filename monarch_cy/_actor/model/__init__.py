"""The actor model: ports, endpoints and actors.

Modules, bottom up: :mod:`.ports` (collectors, ``Port``, ``Channel``),
:mod:`.routed` (an endpoint's call down a cast tree), :mod:`.endpoint`,
:mod:`.actor`, :mod:`.concurrent`, :mod:`.traced_calls` (the adverbs, instrumented
when telemetry is on).  Uses :mod:`..base` and :mod:`..cast`.
"""
