"""``monarch.actor.config``: switches of the actor layer, read at each use.

* ``prefix_python_logs_with_actor`` (default True): Python ``logging`` records made
  inside an actor, and in a client thread that has used ``context()``, carry
  Monarch's ``[actor=<who>] `` prefix (:mod:`monarch_cy._actor.host.log_prefix`).
  Assign it (``monarch_cy.actor.config.prefix_python_logs_with_actor = False``);
  it holds for the process that assigns it.
"""

prefix_python_logs_with_actor = True
