"""A Monarch program: its actor class is defined here, in __main__."""

import os
import sys

from monarch.actor import Actor, endpoint, this_host


class Greeter(Actor):
    def __init__(self, greeting):
        self.greeting = greeting

    @endpoint
    def greet(self, who):
        return f"{self.greeting}, {who}"


if __name__ == "__main__":
    print("ARGV", sys.argv[1:])
    print("ARGV0", os.path.abspath(sys.argv[0]))
    print("FILE", __file__)
    print("PATH0", sys.path[0])
    import monarch.actor
    import monarch_cy.actor
    print("SAME", monarch.actor.Actor is monarch_cy.actor.Actor)
    procs = this_host().spawn_procs(per_host={"procs": 2})
    greeters = procs.spawn("greeters", Greeter, "hello")
    print("RESULT", greeters.greet.call(sys.argv[1]).get(30).values())
    procs.stop().get(10)
