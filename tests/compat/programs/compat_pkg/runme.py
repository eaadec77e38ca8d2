"""Run as ``python -m monarch_cy.compat -m compat_pkg.runme ARGS`` (no main guard:
the module's actor class lives in helper_actors, so no worker re-runs it)."""

import sys

from monarch.actor import this_host

from helper_actors import Adder

print("NAME", __name__)
print("ARGV", sys.argv[1:])
print("ARGV0", sys.argv[0])
procs = this_host().spawn_procs(per_host={"procs": 1})
print("SUMS", sorted(procs.spawn("a", Adder, 1).add.call(2).get(30).values()))
procs.stop().get(10)
