"""``python -m monarch_cy``: the ``monarch-cy`` command line (see docs/cli.md)."""

import sys

from monarch_cy._cli import main

sys.exit(main())
