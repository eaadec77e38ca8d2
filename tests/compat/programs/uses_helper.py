"""A Monarch program whose actor class lives in an importable module next to it."""

import sys

from monarch.actor import this_host

from helper_actors import Adder

if __name__ == "__main__":
    procs = this_host().spawn_procs(per_host={"procs": 2})
    adders = procs.spawn("adders", Adder, 100)
    print("SUMS", sorted(adders.add.call(int(sys.argv[1])).get(30).values()))
    print("WORKER_MONARCH_ACTOR", sorted(set(adders.module_of_actor.call().get(30).values())))
    procs.stop().get(10)
