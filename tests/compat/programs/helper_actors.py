"""An importable module of Monarch actors, used by uses_helper.py.

The workers import it to unpickle ``Adder``: it says ``from monarch.actor import``,
so that works only where monarch_cy.compat is installed in the worker too.
"""

from monarch.actor import Actor, current_rank, endpoint


class Adder(Actor):
    def __init__(self, base):
        self.base = base

    @endpoint
    def add(self, x):
        return self.base + x + current_rank().rank

    @endpoint
    def module_of_actor(self):
        import sys
        return sys.modules["monarch.actor"].__name__
