"""Run one scenario program on Monarch (the reference) and on monarch_cy, and compare.

A scenario is a small Monarch program under ``scenarios/`` that prints its observations
as lines ``@@obs [key, value]`` (JSON).  It runs twice, at the same time:

* reference: the reference venv's python (torchmonarch 0.7.0), ``python scenario.py``;
* monarch_cy: this venv's python, ``python -m monarch_cy.compat scenario.py``.

The record of a run is ``{key: value}`` from its ``@@obs`` lines (a key seen again gets
``#2``, ``#3``...), plus ``exit_code`` and, where the scenario asks, ``stderr[<regex>]``:
the first stderr line matching the regex (or None).  Both records are normalized by the
rules in ``RULES`` (below; each says what it replaces and why) and compared field by
field; every field of either record is compared, none is dropped.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "scenarios")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
REF_VENV = os.environ.get("MONARCH_REF_VENV", os.path.join(ROOT, ".venv-monarch-ref"))
REF_PYTHON = os.path.join(REF_VENV, "bin", "python")
REF_STAMP = os.path.join(REF_VENV, ".monarch-reference-installed")
REF_FAILED = REF_VENV + ".failed"

OBS = "@@obs "


# -- normalization --------------------------------------------------------------------

# Base58 (no 0, O, I, l), as Monarch's random ids: a u64 in base 58, 11 characters or,
# about one time in 40, 10; with at least one capital or digit, so that ordinary words
# are never taken for ids.
_B58 = "[1-9A-HJ-NP-Za-km-z]"
_RANDOM_ID = rf"(?=[a-z]*[1-9A-HJ-NP-Z]){_B58}{{10,11}}(?!{_B58})"
_FRAME = re.compile(r'^(?P<indent>[ \t]*)File "(?P<path>[^"]+)", line \d+, in \S+$')


def _runtime_path(path: str) -> bool:
    """A file of the runtime itself (Monarch's or monarch_cy's package, or the stdlib)."""
    p = path.replace(os.sep, "/")
    return ("/site-packages/monarch/" in p or "/monarch_cy/" in p
            or p.startswith(os.path.dirname(os.__file__).replace(os.sep, "/") + "/"))


def collapse_runtime_frames(text: str) -> str:
    """Rule 1: in a traceback, each run of consecutive frames in the runtime's own files
    (with their source and caret lines) becomes one line ``File <runtime>``.  The two
    systems implement endpoints in different files and depths; the user's frames
    (``<dynamic-code>``, the scenario) and the exception lines are kept as they are."""
    out: list = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FRAME.match(lines[i])
        if m and _runtime_path(m.group("path")):
            indent = m.group("indent")
            j = i
            while j < len(lines):
                mj = _FRAME.match(lines[j])
                if not (mj and _runtime_path(mj.group("path"))):
                    break
                j += 1
                # the frame's source and caret lines are indented deeper than File
                while (j < len(lines) and not _FRAME.match(lines[j])
                       and lines[j].startswith(indent + "  ")):
                    j += 1
            out.append(f"{indent}File <runtime>")
            i = j
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)


# (name, pattern, replacement, why), applied in this order to every string of a record,
# after rule 1.  Each stands for a value that differs from run to run or machine to
# machine in Monarch itself.
RULES = [
    ("scenario path", None, "<scenario>",
     "the scenario's absolute path (the checkout's location)"),
    ("bounced message", r"(?m)^(\s*(?:sender|dest|message type|data_len): ).*$",
     r"\1<internal>", "an undeliverable message's sender, destination, type and size "
     "name each system's internal actors and wire format (the lines themselves, the "
     "call's endpoint and adverb and the reason are compared)"),
    ("bounced to", r"(?m)(undeliverable message to ).*$", r"\1<internal>",
     "as above: the top line of a bounced message sent with no reply port (broadcast)"),
    ("bounced reference", r"(?m)(invalid reference ).*(: actor \w+)$", r"\1<internal>\2",
     "as above: the reference that could not be delivered to"),
    ("temp dir", r"(?:/tmp|/var/tmp|" + re.escape(tempfile.gettempdir()) + r")/diff-[\w.-]+",
     "<tmpdir>", "folders the scenarios make with tempfile (prefix diff-)"),
    ("address", r"\b(?:ipc|tcp|unix|metatls|local)://[^\s,)>\]'\"]*", "<addr>",
     "channel addresses carry random socket names and ports"),
    ("random id in brackets", rf"<{_RANDOM_ID}>", "<id>",
     "Monarch's ids have random base58 parts: name<97veEDbRVqw>"),
    ("random name suffix", rf"(?<=[\w])-{_RANDOM_ID}\b", "-<id>",
     "Monarch suffixes mesh names with a random id: a-jbqPcJkvwag (the suffix is "
     "replaced, never removed, so a name without one still differs)"),
    ("hostname", None, "<host>", "this machine's hostname"),
    ("pid", r"\b(PID=|pid[ =:]\s*)\d+", r"\1<pid>", "process ids"),
    ("timestamp", r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?", "<time>",
     "wall-clock times"),
]


def _compiled_rules(scenario_path: str):
    out = []
    for name, pat, repl, _why in RULES:
        if name == "scenario path":
            pat = re.escape(scenario_path)
        elif name == "hostname":
            pat = r"\b" + re.escape(socket.gethostname()) + r"\b"
        out.append((re.compile(pat), repl))
    return out


def normalize(value, rules):
    if isinstance(value, str):
        value = collapse_runtime_frames(value)
        for pat, repl in rules:
            value = pat.sub(repl, value)
        return value
    if isinstance(value, list):
        return [normalize(v, rules) for v in value]
    if isinstance(value, dict):
        return {k: normalize(v, rules) for k, v in value.items()}
    return value


# -- running ---------------------------------------------------------------------------

def reference_unavailable() -> str | None:
    """Why the reference cannot run here, or None."""
    if os.path.exists(REF_STAMP) and os.access(REF_PYTHON, os.X_OK):
        return None
    why = "the reference venv (torchmonarch 0.7.0) is not installed"
    if os.path.exists(REF_FAILED):
        with open(REF_FAILED) as f:
            tail = f.read().strip().splitlines()[-3:]
        why += ": " + " | ".join(tail)
    else:
        why += "; scripts/setup-monarch-reference.sh makes it"
    return why


def _env(system: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "MONARCH_CY_", "PYTEST_"))}
    # The scenarios' shared helpers (scenarios/_obs.py) import in every process of
    # either system, workers included (an actor's code may name them).
    env["PYTHONPATH"] = SCENARIOS
    if system == "monarch_cy":
        env["PYTHONPATH"] = ROOT + os.pathsep + SCENARIOS
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _default_sigint():
    """In the child: SIGINT back to its default (a suite started in the background by
    a shell without job control inherits it ignored; Monarch's fault hook interrupts
    the main thread with SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_one(system: str, scenario: str, args, timeout: float):
    path = os.path.join(SCENARIOS, scenario)
    if system == "reference":
        cmd = [REF_PYTHON, path, *args]
    else:
        cmd = [sys.executable, "-m", "monarch_cy.compat", path, *args]
    with tempfile.TemporaryDirectory(prefix="diffrun-") as cwd:
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=_env(system),
                               timeout=timeout, stdin=subprocess.DEVNULL,
                               preexec_fn=_default_sigint)
            return r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            return f"killed after {timeout:g} s", out, err


def record_of(code, stdout: str, stderr: str, stderr_patterns=()) -> dict:
    rec: dict = {}
    for line in stdout.splitlines():
        if not line.startswith(OBS):
            continue
        key, value = json.loads(line[len(OBS):])
        k, n = key, 1
        while k in rec:
            n += 1
            k = f"{key}#{n}"
        rec[k] = value
    rec["exit_code"] = code
    err_lines = stderr.splitlines()
    for pat in stderr_patterns:
        rx = re.compile(pat)
        rec[f"stderr[{pat}]"] = next((ln for ln in err_lines if rx.search(ln)), None)
    return rec


def _flatten(value, prefix: str, out: dict):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}[{i}]", out)
        out[f"{prefix}.len"] = len(value)
    else:
        out[prefix] = value
    return out


_MISSING = "<absent>"


def compare(ref: dict, cy: dict) -> list:
    """Readable differences, one entry per differing field (empty when they agree)."""
    fr, fc = _flatten(ref, "", {}), _flatten(cy, "", {})
    keys = list(fr) + [k for k in fc if k not in fr]
    diffs = []
    for k in keys:
        a, b = fr.get(k, _MISSING), fc.get(k, _MISSING)
        if a == b:
            continue
        if isinstance(a, str) and isinstance(b, str) and ("\n" in a or "\n" in b):
            body = "\n".join("    " + ln for ln in difflib.unified_diff(
                a.splitlines(), b.splitlines(), "reference", "monarch_cy", lineterm="", n=1))
            diffs.append(f"{k}:\n{body}")
        else:
            diffs.append(f"{k}:\n    reference:  {json.dumps(a)}\n    monarch_cy: {json.dumps(b)}")
    return diffs


def run_scenario(scenario: str, args=(), *, timeout: float = 120, stderr_patterns=()):
    """Both systems at once; ``(diffs, ref_record, cy_record, raw)``."""
    with ThreadPoolExecutor(2) as pool:
        fut = {s: pool.submit(run_one, s, scenario, list(args), timeout)
               for s in ("reference", "monarch_cy")}
        raw = {s: f.result() for s, f in fut.items()}
    rules = _compiled_rules(os.path.join(SCENARIOS, scenario))
    recs = {s: normalize(record_of(*raw[s], stderr_patterns), rules) for s in raw}
    return compare(recs["reference"], recs["monarch_cy"]), recs["reference"], recs["monarch_cy"], raw


def report(scenario: str, args, diffs, ref, cy, raw) -> str:
    lines = [f"scenario {scenario} {' '.join(args)}: {len(diffs)} field(s) differ "
             "(normalized; see harness.RULES)"]
    lines += diffs
    for s, (code, _out, err) in raw.items():
        tail = "\n".join(err.strip().splitlines()[-15:])
        lines.append(f"--- {s} exit {code}, stderr tail:\n{tail}")
    return "\n".join(lines)


def assert_agree(scenario: str, args=(), **kwargs) -> None:
    """Run ``scenario`` on both systems (:func:`run_scenario`'s keywords) and fail with
    :func:`report` unless their records agree."""
    diffs, ref, cy, raw = run_scenario(scenario, args, **kwargs)
    assert not diffs, report(scenario, args, diffs, ref, cy, raw)
