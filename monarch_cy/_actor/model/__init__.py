"""The actor model: ports, endpoints and actors.

Modules, bottom up: :mod:`.ports` (collectors, ``Port``, ``Channel``),
:mod:`.routed` (an endpoint's call down a cast tree), :mod:`.endpoint`,
:mod:`.actor`, :mod:`.concurrent`.  Uses :mod:`..base` and :mod:`..cast`.
"""
