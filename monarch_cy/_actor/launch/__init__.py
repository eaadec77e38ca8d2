"""Starting procs.

Modules, bottom up: :mod:`.rundir`, :mod:`.job_file`, :mod:`.proc_bind`,
:mod:`.visible_gpus`, :mod:`.bootstrap_command`, :mod:`.launcher`, :mod:`.proc_start`.
Uses only :mod:`..base`.
"""
