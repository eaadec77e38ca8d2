"""The cast tree: a message to a large mesh leaves the controller as a few messages,
and its replies come back about one per head.

Modules, bottom up: :mod:`.reduce` (folds on the way back), :mod:`.tree` (the plan
and the skeleton every tree message uses: ``send_down``, ``route``, ``pass_on``;
casts and relays), :mod:`.router` (which path a call takes), :mod:`.spawn`,
:mod:`.stop`, :mod:`.heartbeat`.  Uses :mod:`..base` and the transport's public API.
"""
