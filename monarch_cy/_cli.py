"""The ``monarch-cy`` console command: its parser, its exit codes, and what goes where.

Streams.  Stdout carries the command's result and nothing else: the text report,
or with ``--json`` exactly one JSON document.  Everything else (progress, logging,
warnings, the output of worker procs forwarded to the controller, C libraries and
child processes writing to file descriptor 1) goes to stderr.  With ``--json`` this
holds at the file-descriptor level: while the command runs, fd 1 and ``sys.stdout``
point at stderr, and the document is written to a private copy of the original
stdout (see :func:`result_stream`).

Exit codes (docs/cli.md lists them with the cases; defined in
:mod:`monarch_cy._cli_common`, which the subcommands share, and re-exported here):

* ``0`` (:data:`EXIT_OK`): success;
* ``1`` (:data:`EXIT_FAILED`): the job ran and failed;
* ``2`` (:data:`EXIT_USAGE`): bad command line, from argparse (unknown option, a
  value that is not a number) or from a value check (``--steps 0``);
* ``3`` (:data:`EXIT_MACHINE`): valid options this machine cannot satisfy
  (``--device gpu`` and no GPU found);
* ``130`` (:data:`EXIT_INTERRUPTED`): interrupted (Ctrl-C, SIGINT).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Iterator, TextIO

from monarch_cy._cli_common import (  # noqa: F401 - the exit codes are this module's too
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MACHINE,
    EXIT_OK,
    EXIT_USAGE,
    HelpFormatter,
)

_EPILOG = ("exit codes: 0 success, 1 the job failed, 2 usage error, 3 this machine cannot "
           "do what was asked (e.g. --device gpu without a GPU), 130 interrupted. With --json, "
           "stdout holds exactly one JSON document and everything else goes to stderr. "
           "See docs/cli.md.")


def _info(args: argparse.Namespace, out: TextIO) -> int:
    from monarch_cy._info import format_report, report

    r = report()
    print(json.dumps(r, indent=2) if args.json else format_report(r), file=out)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The ``monarch-cy`` parser; each subcommand sets ``func(args, out) -> exit code``."""
    from monarch_cy import __version__

    parser = argparse.ArgumentParser(
        prog="monarch-cy", description="monarch_cy command line: platform report and the training job",
        epilog=_EPILOG, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print 'monarch-cy <version>' and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands", help="run 'monarch-cy COMMAND --help' for its options")
    p = sub.add_parser(
        "info", help="print the platform, GPU runtime, devices, NCCL/RCCL and verbs",
        description="Report what this machine offers monarch_cy: the GPU runtime bound and from "
                    "where, the driver, the devices, NCCL/RCCL and RDMA verbs. Every probe is "
                    "best-effort: what is missing is reported, and the exit code is 0.",
        epilog="exit codes: 0 (also when nothing is found), 2 usage error. See docs/cli.md.",
        formatter_class=HelpFormatter)
    p.add_argument("--json", action="store_true",
                   help="print the report as one JSON document on stdout (keys: docs/cli.md; "
                        "'schema' is its version)")
    p.set_defaults(func=_info)
    from monarch_cy._stacks_cli import add_parser as add_stacks  # `monarch-cy stacks`
    add_stacks(sub)
    from monarch_cy._train.cli import add_parser as add_train

    add_train(sub, epilog=_EPILOG)
    from monarch_cy._debug.cli import add_parser as add_debug  # `monarch-cy debug`
    add_debug(sub)
    return parser


@contextlib.contextmanager
def result_stream(reserve: bool) -> Iterator[TextIO]:
    """Yield the stream a command writes its result to.

    ``reserve=False``: ``sys.stdout`` itself.  ``reserve=True`` (``--json``): stdout
    is kept for the result alone.  Inside the block ``sys.stdout`` is ``sys.stderr``
    and, when ``sys.stdout`` is the process's fd 1, fd 1 is a duplicate of fd 2, so
    that whatever else writes to stdout (``print``, forwarded worker output, C code,
    child processes started inside the block, which inherit fd 1) reaches stderr;
    the yielded stream writes to the original stdout.  Both are restored on exit.
    When ``sys.stdout`` is not fd 1 (tests capture it), only ``sys.stdout`` is swapped.
    """
    if not reserve:
        yield sys.stdout
        return
    original = sys.stdout
    original.flush()
    try:
        on_fd1 = original.fileno() == 1
    except (AttributeError, OSError, ValueError):      # io.UnsupportedOperation: no fd
        on_fd1 = False
    if on_fd1:
        result: TextIO = os.fdopen(os.dup(1), "w", encoding=getattr(original, "encoding", None) or "utf-8")
        os.dup2(2, 1)
    else:
        result = original
    sys.stdout = sys.stderr
    try:
        yield result
    finally:
        result.flush()
        with contextlib.suppress(Exception):
            original.flush()           # what was written to it meanwhile goes to stderr
        sys.stdout = original
        if on_fd1:
            os.dup2(result.fileno(), 1)
            result.close()


def main(argv: list[str] | None = None) -> int:
    """Run ``monarch-cy`` with ``argv`` (default ``sys.argv[1:]``); returns the exit
    code.  Usage errors, ``--help`` and ``--version`` raise ``SystemExit`` from argparse
    (2, 0, 0)."""
    args = build_parser().parse_args(argv)
    try:
        with result_stream(getattr(args, "json", False)) as out:
            return args.func(args, out)
    except KeyboardInterrupt:
        print(f"monarch-cy {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``monarch-cy info | head``): no traceback, and no
        # second error when Python flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        print(f"monarch-cy {args.command}: standard output was closed", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
