"""Running actors inside a proc.

Modules, bottom up: :mod:`.supervise_call`, :mod:`.proc_setup`, :mod:`.actor_host`,
:mod:`.stopping`, :mod:`.logs`.  Uses the floors below (base, cast, model).
"""
