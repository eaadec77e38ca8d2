"""The actor model's bottom floor: the job's state and the values every floor passes.

Modules, bottom up: :mod:`.state` (the node, the registries), :mod:`.addresses`,
:mod:`.transports` (``enable_transport``), :mod:`.shape`, :mod:`.selection`,
:mod:`.value_mesh`, :mod:`.future`, :mod:`.returns_future`, :mod:`.failure`,
:mod:`.client_faults`, :mod:`.actor_config` (``monarch.actor.config``).
Imports nothing of the actor model above it.
"""
