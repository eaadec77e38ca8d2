"""Private implementation of ``monarch-cy train`` (see :mod:`monarch_cy.train`)."""
