"""Where the actor tests' helpers live, for tests that start processes of their own:
``ACTOR_TESTS`` (this folder: ``_actors.py``, ``_sends.py``... for their
``PYTHONPATH``), ``ROOT`` (the checkout)."""

import os

ACTOR_TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(ACTOR_TESTS))
