"""Run Monarch's own Python tests on torchmonarch 0.7.0 and on monarch_cy, side by side.

Monarch's test suite (``python/tests`` of github:meta-pytorch/monarch) is the
specification monarch_cy is judged by.  This tool takes a Monarch checkout (a git
repository, bare or not, at a chosen revision, or a folder holding ``python/tests``),
copies its tests and its ``pyproject.toml`` (pytest's settings: ``asyncio_mode = auto``,
the 300 s timeout) into a scratch folder, never into this repository, and runs each
chosen file twice, unchanged:

* **reference**: the reference venv's python (``.venv-monarch-ref``, torchmonarch 0.7.0;
  ``scripts/setup-monarch-reference.sh`` makes it), ``python -m pytest FILE``;
* **monarch_cy**: this project's venv, ``python -m monarch_cy.compat -m pytest FILE``, so
  ``import monarch...`` gives monarch_cy (``monarch_cy/compat``).  The only additions
  are placeholders for a closed list of Monarch's Rust internals that test files import
  at module level (``scripts/monarch_tests_site/sitecustomize.py``): they import, and
  using one raises ``NotImplementedError``.

Both runs use the same pytest and plugins (pytest, pytest-asyncio, pytest-timeout, and
``pyre_extensions``, which test files import),
installed once into a folder of their own that goes first on ``PYTHONPATH``, so neither
venv is changed.  Each file runs in a pytest process of its own (a hang or a crash costs
that file only; ``--file-timeout`` bounds it).  The outcomes come from pytest's JUnit XML.

It prints, per test, the outcome on each system and the key line of a failure (the
exception line of its message), then the counts per file; ``--json`` writes the whole
record, ``--markdown`` the per-file table used in docs/monarch-compat.md.  Exit status:
0 when every test that passed on the reference passed on monarch_cy, 1 otherwise, 2 on
bad usage.

Not part of CI (CI cannot fetch Monarch); run it by hand, e.g.::

    scripts/monarch-tests.sh --monarch ~/src/monarch --rev 3fc0a66e3140 \\
        test_python_actors.py test_actor_error.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.join(ROOT, "scripts", "monarch_tests_site")   # placeholders (see there)
#: pytest, its plugins, and what Monarch's test files import besides Monarch and its
#: own dependencies (``pyre_extensions``: torchmonarch brings it; monarch_cy does not).
PLUGINS = ("pytest>=8", "pytest-asyncio>=0.23", "pytest-timeout>=2.2", "pyre-extensions")

#: The selection issue 40 names: Monarch's public surface that runs on a CPU.
DEFAULT_FILES = [
    "test_python_actors.py", "test_actor_error.py", "test_proc_mesh.py",
    "test_host_mesh.py", "test_config.py", "test_job.py", "test_concurrent_endpoints.py",
    "test_supervision_hierarchy.py", "test_future_characterization.py",
    "test_deferred_pickle_characterization.py", "test_port_reconstruction.py",
    "test_remote_functions.py", "test_actor_shape.py", "test_rdma_cpu_no_torch.py",
    "test_rdma_unit.py", "test_rdma_action.py", "test_rdma_initialization.py",
    "test_rdma_local_memory_cache.py", "test_spmd.py", "test_spmd_host_mesh.py",
    "test_coalescing.py", "test_controller.py", "test_port_forward.py", "test_shell.py",
]

PASS, FAIL, ERROR, SKIP, XFAIL, XPASS, ABSENT = (
    "passed", "failed", "error", "skipped", "xfailed", "xpassed", "-")


def die(msg: str) -> None:
    print(f"monarch-tests: {msg}", file=sys.stderr)
    sys.exit(2)


# -- the Monarch checkout -----------------------------------------------------------------

def _is_git(path: str) -> bool:
    return subprocess.run(["git", "-C", path, "rev-parse", "--git-dir"],
                          capture_output=True).returncode == 0


def extract(monarch: str, rev: str | None, dest: str) -> str:
    """Copy ``python/tests`` and ``pyproject.toml`` of ``monarch`` (at ``rev``) into
    ``dest``; returns the revision's full hash, or ``'working tree'``."""
    if not os.path.isdir(monarch):
        die(f"--monarch {monarch!r} is not a folder")
    if _is_git(monarch):
        rev = rev or "HEAD"
        r = subprocess.run(["git", "-C", monarch, "rev-parse", "--verify", rev + "^{commit}"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            die(f"--rev {rev!r} is not a commit of {monarch!r}: {r.stderr.strip()}")
        full = r.stdout.strip()
        with tempfile.TemporaryFile() as tar:
            subprocess.run(["git", "-C", monarch, "archive", full, "python/tests",
                            "pyproject.toml"], stdout=tar, check=True)
            tar.seek(0)
            with tarfile.open(fileobj=tar) as t:
                t.extractall(dest, filter="data")
        return full
    if rev:
        die(f"--rev {rev!r} given, but {monarch!r} is not a git repository")
    if not os.path.isdir(os.path.join(monarch, "python", "tests")):
        die(f"{monarch!r} has no python/tests folder (is it a Monarch checkout?)")
    shutil.copytree(os.path.join(monarch, "python", "tests"),
                    os.path.join(dest, "python", "tests"))
    shutil.copy(os.path.join(monarch, "pyproject.toml"), dest)
    return "working tree"


def ensure_plugins(folder: str, python: str) -> None:
    """pytest and its plugins, in a folder of their own (not in either venv); the
    folder's stamp lists what was installed, so a longer list installs the rest."""
    stamp = os.path.join(folder, ".installed")
    want = "\n".join(PLUGINS)
    if os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == want:
                return
    print(f"[monarch-tests] installing {', '.join(PLUGINS)} into {folder}", file=sys.stderr)
    subprocess.run([python, "-m", "pip", "--disable-pip-version-check", "-q", "install",
                    "--target", folder, *PLUGINS], check=True, stdin=subprocess.DEVNULL)
    with open(stamp, "w") as f:
        f.write(want)


# -- running ------------------------------------------------------------------------------

def command(system: str, python: str, test_file: str, xml: str, k: str | None) -> list:
    base = [python, "-m"] + (["monarch_cy.compat", "-m"] if system == "monarch_cy" else [])
    cmd = base + ["pytest", "-p", "no:cacheprovider", "-q", "-rN", "--junitxml", xml,
                  "-o", "junit_family=xunit1", test_file]
    if k:
        cmd += ["-k", k]
    return cmd


def run_file(system: str, python: str, tree: str, test_file: str, out: str,
             plugins: str, k: str | None, timeout: float) -> dict:
    """Run one file on one system; returns ``{test id: (outcome, key line)}`` plus the
    run's own outcome under the key ``None``."""
    xml = os.path.join(out, f"{system}-{test_file.replace('/', '_')}.xml")
    log = xml[:-4] + ".log"
    env = {k_: v for k_, v in os.environ.items()
           if not k_.startswith(("PYTHON", "MONARCH_CY_", "PYTEST_", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = plugins
    env["PYTHONUNBUFFERED"] = "1"
    if system == "monarch_cy":
        env["PYTHONPATH"] += os.pathsep.join(["", SITE, ROOT])
    start = time.monotonic()
    with open(log, "w") as f:
        try:
            p = subprocess.run(command(system, python, os.path.join("python", "tests", test_file),
                                       xml, k),
                               cwd=tree, env=env, stdout=f, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=timeout,
                               start_new_session=True)
            status = f"exit {p.returncode}"
        except subprocess.TimeoutExpired:
            status = f"killed after {timeout:g} s"
    results = parse_junit(xml) if os.path.exists(xml) else {}
    results[None] = (status, f"{time.monotonic() - start:.0f} s", log)
    return results


def reused(folder: str, test_file: str) -> dict:
    """The reference's outcomes of ``test_file`` from an earlier run's folder."""
    xml = os.path.join(folder, f"reference-{test_file.replace('/', '_')}.xml")
    if not os.path.exists(xml):
        die(f"--reference-from {folder!r} has no results for {test_file} ({xml})")
    res = parse_junit(xml)
    res[None] = ("reused", "0 s", xml[:-4] + ".log")
    return res


def _key_line(text: str) -> str:
    """The line of a failure a reader wants first: the last exception line."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("E ") or ln.startswith("E\t"):
            return ln[1:].strip()[:160]
    return (lines[0] if lines else "")[:160]


def parse_junit(path: str) -> dict:
    results: dict = {}
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return results
    for case in root.iter("testcase"):
        name = case.get("name", "")
        last = case.get("classname", "").rsplit(".", 1)[-1]
        tid = f"{last}::{name}" if last[:1].isupper() else name
        outcome, key = PASS, ""
        for child in case:
            body = child.text or child.get("message", "")
            if child.tag == "failure":
                outcome, key = FAIL, _key_line(body)
            elif child.tag == "error":
                if outcome == PASS:
                    outcome = ERROR
                key = key or _key_line(body)
            elif child.tag == "skipped":
                xfail = child.get("type") == "pytest.xfail"
                outcome = XFAIL if xfail else SKIP
                key = (child.get("message") or "")[:160]
        results[tid] = (outcome, key)
    return results


# -- reporting ----------------------------------------------------------------------------

def compare(files: list, ref: dict, cy: dict) -> tuple[list, dict]:
    rows, per_file = [], {}
    for f in files:
        r, c = ref.get(f, {}), cy.get(f, {})
        ids = [t for t in r if t is not None] + [t for t in c if t is not None and t not in r]
        counts = {"ref_passed": 0, "both_passed": 0, "regressed": 0, "cy_only": 0,
                  "ref_total": len([t for t in r if t is not None]),
                  "ref_run": r.get(None, ("not run",))[0],
                  "cy_run": c.get(None, ("not run",))[0]}
        for t in ids:
            ro, rk = r.get(t, (ABSENT, ""))
            co, ck = c.get(t, (ABSENT, ""))
            if ro == PASS:
                counts["ref_passed"] += 1
                counts["both_passed" if co == PASS else "regressed"] += 1
            elif co == PASS:
                counts["cy_only"] += 1
            rows.append((f, t, ro, co, ck if co != PASS else (rk if ro != PASS else "")))
        per_file[f] = counts
    return rows, per_file


def print_report(rows: list, per_file: dict, only_diff: bool) -> None:
    w = max([len(f"{f}::{t}") for f, t, *_ in rows] + [20])
    w = min(w, 90)
    print(f"{'test':<{w}}  {'0.7.0':<8} {'cy':<8} key line")
    for f, t, ro, co, key in rows:
        if only_diff and ro == co:
            continue
        mark = "!" if ro == PASS and co != PASS else " "
        print(f"{(f + '::' + t)[:w]:<{w}}{mark} {ro:<8} {co:<8} {key}")
    print()
    print(f"{'file':<42} {'0.7.0 passed':>12} {'cy passed':>10} {'missing':>8}  runs")
    tot = [0, 0, 0]
    for f, c in per_file.items():
        tot[0] += c["ref_passed"]
        tot[1] += c["both_passed"]
        tot[2] += c["regressed"]
        print(f"{f:<42} {c['ref_passed']:>12} {c['both_passed']:>10} {c['regressed']:>8}"
              f"  {c['ref_run']} / {c['cy_run']}")
    print(f"{'total':<42} {tot[0]:>12} {tot[1]:>10} {tot[2]:>8}")


def markdown(per_file: dict, rev: str, date: str) -> str:
    out = [f"Run {date}, Monarch rev `{rev[:12]}`, torchmonarch 0.7.0 against monarch_cy:",
           "", "| file | pass on 0.7.0 | of those, pass on monarch_cy | also pass on monarch_cy only |",
           "| --- | ---: | ---: | ---: |"]
    t = [0, 0, 0]
    for f, c in per_file.items():
        out.append(f"| `{f}` | {c['ref_passed']} | {c['both_passed']} | {c['cy_only']} |")
        t[0] += c["ref_passed"]
        t[1] += c["both_passed"]
        t[2] += c["cy_only"]
    out.append(f"| **total** | **{t[0]}** | **{t[1]}** | **{t[2]}** |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/monarch-tests.sh", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="test files under python/tests "
                    "(default: the issue-40 selection)")
    ap.add_argument("--monarch", required=True, help="a Monarch checkout or git repository")
    ap.add_argument("--rev", help="the revision to take the tests from (git only)")
    ap.add_argument("--only", choices=("reference", "monarch_cy"), help="run one system")
    ap.add_argument("-k", help="pytest -k expression, for both systems")
    ap.add_argument("--jobs", type=int, default=1, help="files run at once (default 1)")
    ap.add_argument("--file-timeout", type=float, default=1200,
                    help="seconds one file may run on one system (default 1200)")
    ap.add_argument("--reference-from", metavar="DIR",
                    help="take the reference's outcomes from an earlier run's --out folder "
                    "(same rev and files) instead of running it again")
    ap.add_argument("--diff", action="store_true", help="print only tests that differ")
    ap.add_argument("--out", help="keep logs, XML and results here (default: a temp folder)")
    ap.add_argument("--json", help="write the per-test record here")
    ap.add_argument("--markdown", help="write the per-file table here")
    ap.add_argument("--ref-venv", default=os.environ.get(
        "MONARCH_REF_VENV", os.path.join(ROOT, ".venv-monarch-ref")))
    ap.add_argument("--venv", default=os.path.join(ROOT, ".venv"))
    a = ap.parse_args(argv)
    if a.jobs < 1:
        die(f"--jobs must be at least 1, got {a.jobs}")
    if a.file_timeout <= 0:
        die(f"--file-timeout must be positive, got {a.file_timeout}")
    pythons = {"reference": os.path.join(a.ref_venv, "bin", "python"),
               "monarch_cy": os.path.join(a.venv, "bin", "python")}
    systems = [a.only] if a.only else ["reference", "monarch_cy"]
    for s in systems:
        if not os.access(pythons[s], os.X_OK):
            die(f"no python for {s} at {pythons[s]} (scripts/setup.sh; "
                "scripts/setup-monarch-reference.sh)")
    out = a.out or tempfile.mkdtemp(prefix="monarch-tests-")
    os.makedirs(out, exist_ok=True)
    tree = os.path.join(out, "monarch")
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    rev = extract(os.path.abspath(a.monarch), a.rev, tree)
    files = a.files or DEFAULT_FILES
    for f in files:
        if not os.path.isfile(os.path.join(tree, "python", "tests", f)):
            die(f"no test file {f!r} in python/tests at {rev}")
    plugins = os.path.join(ROOT, ".monarch-tests-plugins")
    ensure_plugins(plugins, pythons[systems[0]])
    print(f"[monarch-tests] rev {rev}; {len(files)} files; logs in {out}", file=sys.stderr)

    results: dict = {s: {} for s in ("reference", "monarch_cy")}
    jobs = [(s, f) for f in files for s in systems]

    def one(job):
        s, f = job
        if s == "reference" and a.reference_from:
            res = reused(a.reference_from, f)
        else:
            res = run_file(s, pythons[s], tree, f, out, plugins, a.k, a.file_timeout)
        st, took, _ = res[None]
        n = sum(1 for t, v in res.items() if t is not None and v[0] == PASS)
        print(f"[monarch-tests] {s:<10} {f}: {n} passed of {len(res) - 1} ({st}, {took})",
              file=sys.stderr, flush=True)
        return s, f, res

    with ThreadPoolExecutor(a.jobs) as pool:
        for s, f, res in pool.map(one, jobs):
            results[s][f] = res

    rows, per_file = compare(files, results["reference"], results["monarch_cy"])
    print_report(rows, per_file, a.diff)
    date = datetime.date.today().isoformat()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rev": rev, "date": date, "per_file": per_file,
                       "tests": [dict(zip(("file", "test", "reference", "monarch_cy", "key"), r))
                                 for r in rows]}, fh, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as fh:
            fh.write(markdown(per_file, rev, date))
    if a.only:
        return 0
    return 1 if any(c["regressed"] for c in per_file.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
