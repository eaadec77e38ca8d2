"""Private implementation of :mod:`monarch_cy.actor` (one concept per module).

Nothing here is public API; :mod:`monarch_cy.actor` re-exports what is.
Importing this package is cheap: zmq, asyncio and torch are imported lazily.
"""
