"""A controller script for tests/debug/test_debugger.py: run it, drive its terminal.

``python _debugee.py RANKS [MARKDIR]``: 4 procs; each rank in RANKS (``1,3``) pauses
(odd ranks with ``pdb.set_trace()``, even ones with ``breakpoint()``), then, once
continued, writes ``MARKDIR/rank<r>`` when MARKDIR is given; the script prints
``RESULT [...]``.  ``python _debugee.py idle``: start the debug controller, print
``READY``, wait for a line on stdin.
"""

import os
import pdb
import sys

from monarch_cy.actor import Actor, current_rank, debug_controller, endpoint, this_host


class Debugee(Actor):
    @endpoint
    def to_debug(self, which, markdir=None):
        rank = current_rank().rank
        secret_local = rank * 10
        if rank in which:
            if rank % 2:
                pdb.set_trace()
            else:
                breakpoint()  # noqa: T100
        if markdir:
            open(os.path.join(markdir, f"rank{rank}"), "w").close()
        return rank + secret_local


if __name__ == "__main__":
    if sys.argv[1] == "idle":
        debug_controller()
        print("READY", os.getpid(), flush=True)
        sys.stdin.readline()
        sys.exit(0)
    which = [int(x) for x in sys.argv[1].split(",")]
    pm = this_host().spawn_procs(per_host={"gpus": 4})
    m = pm.spawn("debugee", Debugee)
    print("RESULT", list(m.to_debug.call(which, *sys.argv[2:]).get().values()), flush=True)
