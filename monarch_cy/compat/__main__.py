"""``python -m monarch_cy.compat [--shadow] script.py [args]``: run a Monarch program.

See :func:`main` and ``--help``.
"""

from __future__ import annotations

import os
import sys

PROG = "python -m monarch_cy.compat"

USAGE = f"""\
usage: {PROG} [--shadow] script.py [args ...]
       {PROG} [--shadow] -m module [args ...]
       {PROG} [--shadow] -c command [args ...]
       {PROG} [--shadow] - [args ...]          (program read from stdin)

Run an unmodified Monarch program on monarch_cy: 'import monarch.actor' (and
monarch.rdma, monarch.job, monarch.spmd) gives monarch_cy's modules, in this
process and in every proc it starts.  The program runs as 'python script.py
[args]' would: same sys.argv[1:], sys.path[0] is the script's folder (the current
folder for -m, '' for -c and -), __name__ == "__main__", __file__ is the script's
absolute path.  A failure (an exception, a syntax error, KeyboardInterrupt) is
reported with the program's frames only and exits with python's status.

options:
  -h, --help  show this help and exit
  --shadow    use monarch_cy even where the real Monarch (torchmonarch) is
              installed; without it, that case is refused
  --          end of options: the next argument is the script
"""


def _fail(msg: str, code: int) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


def _parse(argv: list):
    """``(shadow, kind, target, args)``; kind is 'path', 'module', 'command' or
    'stdin'."""
    shadow = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        if a == "--shadow":
            shadow = True
        elif a == "--":
            if i + 1 >= len(argv):
                break
            return shadow, "path", argv[i + 1], argv[i + 2:]
        elif a == "-":
            return shadow, "stdin", "-", argv[i + 1:]
        elif a.startswith("-m") or a.startswith("-c"):
            kind = "module" if a[1] == "m" else "command"
            if len(a) > 2:
                return shadow, kind, a[2:], argv[i + 1:]
            if i + 1 >= len(argv):
                _fail(f"argument expected for the {a} option", 2)
            return shadow, kind, argv[i + 1], argv[i + 2:]
        elif a.startswith("-"):
            _fail(f"unknown option {a!r} (options go before the script; see --help)", 2)
        else:
            return shadow, "path", a, argv[i + 1:]
        i += 1
    sys.stderr.write(USAGE)
    _fail("no program given: a script, -m module, -c command or -", 2)


def _set_path0(new: str) -> None:
    """Replace ``sys.path[0]`` (the current folder, as for any ``python -m``) by
    ``new``; keep monarch_cy importable when it was found only through that entry."""
    old = sys.path[0] if sys.path else ""
    if sys.path:
        sys.path[0] = new
    else:
        sys.path.append(new)
    import monarch_cy
    root = os.path.dirname(os.path.dirname(os.path.abspath(monarch_cy.__file__)))
    if os.path.realpath(old or ".") == os.path.realpath(root) and new != old:
        if not any(os.path.realpath(p or ".") == os.path.realpath(root)
                   for p in sys.path):
            sys.path.append(old)


def _launcher_file(name: str) -> bool:
    """Whether code of file ``name`` is this launcher's (this module, runpy, the
    import machinery) rather than the program's."""
    import runpy
    return name in (__file__, runpy.__file__) or name.startswith(
        ("<frozen runpy>", "<frozen importlib."))


def _program_frames(tb):
    """``tb`` from the program's first frame on: the frames of this module, runpy and
    the import machinery that precede it are dropped, so the report reads as plain
    ``python``'s.  None when no frame is the program's (a syntax error of the script:
    ``python`` then prints the error's own lines only)."""
    while tb is not None and _launcher_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def _report_program_frames_only() -> None:
    """Make the interpreter's report of an exception leaving :func:`main` (a
    ``KeyboardInterrupt``: re-raised so that ``python``'s exit by SIGINT, after the
    ``atexit`` handlers, is kept) show the program's frames only, through whatever
    ``sys.excepthook`` is installed when it is reported."""
    hook = sys.excepthook

    def report(typ, value, tb):
        sys.excepthook = hook
        tb = _program_frames(tb)
        if isinstance(value, BaseException):   # what the default hook prints
            value = value.with_traceback(tb)
        hook(typ, value, tb)
    sys.excepthook = report


def main(argv: list | None = None) -> None:
    """Parse ``argv`` (default ``sys.argv[1:]``), :func:`monarch_cy.compat.install`,
    and run the program; exits like ``python`` would."""
    argv = sys.argv[1:] if argv is None else list(argv)
    shadow, kind, target, args = _parse(argv)

    import runpy

    from monarch_cy import compat

    if kind == "path":
        path = os.path.abspath(target)
        if not os.path.exists(path):
            _fail(f"can't open file {path!r}: [Errno 2] No such file or directory", 2)
        if os.path.isdir(path) and not any(
                os.path.exists(os.path.join(path, "__main__" + ext))
                for ext in (".py", ".pyc")):
            _fail(f"can't find '__main__' module in {path!r}", 1)
    try:
        compat.install(shadow=shadow)
    except RuntimeError as e:
        _fail(str(e), 1)

    try:
        if kind == "path":
            if os.path.isfile(path) and not _is_zip(path):
                _set_path0(os.path.dirname(os.path.realpath(path)))
            else:
                _set_path0(path)     # a folder or zip file with a __main__ module
            sys.argv = [target, *args]
            runpy.run_path(path, run_name="__main__")
        elif kind == "module":
            _check_module(target)
            sys.argv = [target, *args]     # runpy puts the module's path in argv[0]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            if kind == "stdin":
                source, filename = sys.stdin.read(), "<stdin>"
            else:
                source, filename = target, "<string>"
            _set_path0("")
            sys.argv = ["-" if kind == "stdin" else "-c", *args]
            _run_source(source, filename)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        _report_program_frames_only()
        raise
    except BaseException as e:  # noqa: BLE001 - reported as python would, exit 1
        tb = _program_frames(e.__traceback__)
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        sys.exit(1)


def _is_zip(path: str) -> bool:
    import zipfile
    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def _check_module(name: str) -> str:
    """Exit as ``python -m name`` would when ``name`` cannot be run; else return the
    file that will run."""
    import importlib.util
    exe = sys.executable or "python"
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            main_spec = importlib.util.find_spec(name + ".__main__")
            if main_spec is None:
                _fail(f"No module named {name}.__main__; {name!r} is a package and "
                      "cannot be directly executed", 1)
            spec = main_spec
    except (ImportError, ValueError) as e:
        print(f"{exe}: Error while finding module specification for {name!r} "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        sys.exit(1)
    if spec is None:
        print(f"{exe}: No module named {name}", file=sys.stderr)
        sys.exit(1)
    return spec.origin or ""


def _run_source(source: str, filename: str) -> None:
    """Run program text as ``python -c``/``python -`` does: in a fresh ``__main__``
    module (restored afterwards), with ``__file__`` only for stdin."""
    import types
    code = compile(source, filename, "exec")
    mod = types.ModuleType("__main__")
    mod.__dict__["__builtins__"] = __builtins__
    if filename == "<stdin>":
        mod.__file__ = "<stdin>"
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = mod
    try:
        exec(code, mod.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


if __name__ == "__main__":
    main()
