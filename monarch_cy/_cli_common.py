"""What the ``monarch-cy`` command and its subcommands share: the exit codes and the
``--help`` formatter.

:mod:`monarch_cy._cli` (the top parser) and the subcommands' modules
(:mod:`monarch_cy._train.cli`) both import it; it imports nothing of monarch_cy.
The exit codes' meanings are in :mod:`monarch_cy._cli` and docs/cli.md.
"""

from __future__ import annotations

import argparse

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_MACHINE", "EXIT_INTERRUPTED",
           "HelpFormatter"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_MACHINE = 3
EXIT_INTERRUPTED = 130


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with every option's default: ``(default: X)`` is appended to its
    help unless the help already states its default (contains ``(default``) or the
    option is a flag (``store_true``: off unless given)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action) or text
