"""Proc and host meshes, and their supervision in the controller.

Modules, bottom up: :mod:`.proc_state`, :mod:`.restart_policy`, :mod:`.heartbeat`,
:mod:`.respawn`, :mod:`.failures`, :mod:`.remote_ops`, :mod:`.stacks`,
:mod:`.proc_stop`, :mod:`.host_refs`, :mod:`.proc_mesh`, :mod:`.spawn_hooks`,
:mod:`.controllers`, :mod:`.host_mesh`, :mod:`.mesh_ctl`, :mod:`.lifecycle`.  Uses every
floor below.
"""
