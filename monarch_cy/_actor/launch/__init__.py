"""Starting procs.

Modules, bottom up: :mod:`.rundir`, :mod:`.job_file`, :mod:`.proc_bind`,
:mod:`.visible_gpus`, :mod:`.bootstrap_command`, :mod:`.proc_output` (each proc's fds
1 and 2, read by the controller), :mod:`.launcher`, :mod:`.proc_start`.  Uses
:mod:`..base` and, for printing the procs' output, :mod:`..host.logs` and
:mod:`..host.log_sink`.
"""
