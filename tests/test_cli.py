"""The ``monarch-cy`` command as scripts meet it: --version, --help with defaults,
exit codes, --json putting exactly one document on stdout, and the documented
shape of ``info --json`` (docs/cli.md), which these tests keep in step with the code."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import monarch_cy
from monarch_cy import _cli, _info
from monarch_cy._train import controller
from monarch_cy._train.config import MachineError, TrainConfig
from monarch_cy._train.report import Progress

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--procs", "1", "--steps", "3", "--width", "16", "--heads", "1", "--layers", "1",
        "--batch", "2", "--block", "8", "--checkpoint-every", "0", "--device", "cpu"]


def _run(*args, timeout=120, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **env)
    return subprocess.run([sys.executable, "-m", "monarch_cy._cli", *args],
                          capture_output=True, text=True, timeout=timeout, env=e, cwd=str(ROOT))


def _parsers(parser: argparse.ArgumentParser, name="monarch-cy"):
    """(name, parser) for the top-level parser and every subcommand's, recursively."""
    yield name, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub_name, sub in a.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


# -- --version and --help

def test_version_prints_name_and_package_version(capsys):
    with pytest.raises(SystemExit) as e:
        _cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"monarch-cy {monarch_cy.__version__}\n"


def test_version_from_the_command_line():
    r = _run("--version", timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"monarch-cy {monarch_cy.__version__}\n", "")


def test_every_option_has_help_and_shows_its_default(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    names = []
    for name, parser in _parsers(_cli.build_parser()):
        names.append(name)
        text = " ".join(parser.format_help().split())
        formatter = parser._get_formatter()
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                assert a.help, f"{name}: the subcommand list has no help"
                for choice in a._choices_actions:
                    assert (choice.help or "").strip(), f"{name} {choice.dest}: no help line"
                continue
            opt = "/".join(a.option_strings) or a.dest
            assert (a.help or "").strip(), f"{name} {opt}: no help text"
            if a.nargs == 0 or a.default == argparse.SUPPRESS:
                continue                       # flags, --help, --version: nothing to default
            shown = formatter._get_help_string(a)
            assert "(default" in shown, f"{name} {opt}: --help does not show the default"
            if a.default not in (None, []):
                assert f"(default: {a.default})" in text, f"{name} {opt}: default {a.default!r} missing"
    assert names == ["monarch-cy", "monarch-cy info", "monarch-cy stacks", "monarch-cy train",
                     "monarch-cy debug"]


def test_help_exits_0_and_lists_exit_codes(capsys):
    for argv in (["--help"], ["info", "--help"], ["train", "--help"]):
        with pytest.raises(SystemExit) as e:
            _cli.main(argv)
        assert e.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: monarch-cy") and "exit codes: 0" in out


# -- usage errors: exit 2

@pytest.mark.parametrize("argv, message", [
    ([], "the following arguments are required: COMMAND"),
    (["--no-such-option"], "the following arguments are required"),
    (["nope"], "invalid choice: 'nope'"),
    (["info", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    (["train", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    (["train", "--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["train", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
])
def test_argparse_usage_errors_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        _cli.main(argv)
    assert e.value.code == _cli.EXIT_USAGE == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.startswith("usage: monarch-cy") and message in cap.err


@pytest.mark.parametrize("argv, message", [
    (["--steps", "-1"], "--steps must be a positive integer, got -1"),
    (["--steps", "0"], "--steps must be a positive integer, got 0"),
    (["--procs", "0"], "--procs must be a positive integer, got 0"),
    (["--procs", "65"], "--procs must be at most 64, got 65"),
    (["--batch", "-2"], "--batch must be a positive integer, got -2"),
    (["--lr", "1.5"], "--lr must be in (0, 1), got 1.5"),
    (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["--threads", "-1"], "--threads must be an integer >= 0, got -1"),
    (["--checkpoint-every", "-5"], "--checkpoint-every must be an integer >= 0, got -5"),
    (["--inject-fault", "rank=x"], "fault spec must look like 'rank=1,step=40', got 'rank=x'"),
])
def test_bad_values_name_the_option_and_exit_2(argv, message, capsys):
    assert _cli.main(["train", "--device", "cpu", *argv]) == _cli.EXIT_USAGE
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == f"monarch-cy train: error: {message}\n"


def test_value_errors_come_before_machine_errors():
    with pytest.raises(ValueError, match="--steps") as e:
        TrainConfig(device="gpu", steps=0).validate(gpus=0)
    assert not isinstance(e.value, MachineError)
    with pytest.raises(MachineError, match="--device gpu but no GPU was found"):
        TrainConfig(device="gpu", procs=2).validate(gpus=0)
    with pytest.raises(MachineError, match="--procs 3 is more than the 2 GPU"):
        TrainConfig(procs=3).validate(gpus=2)


# -- failures: exit 3, 1, 130

def test_device_gpu_without_a_gpu_exits_3():
    r = _run("train", "--device", "gpu", timeout=60, MONARCH_CY_GPU_PLATFORM="none")
    assert r.returncode == _cli.EXIT_MACHINE == 3, r.stderr
    assert r.stdout == ""
    assert r.stderr.startswith("monarch-cy train: error: --device gpu but no GPU was found")


def _fake_run(monkeypatch, outcome):
    def run(self):
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
    monkeypatch.setattr(controller.TrainingRun, "run", run)


def _summary(**over):
    s = {"steps_completed": 3, "world_size": 1, "device": "cpu", "parameters": 10, "first_loss": 3.0,
         "final_loss": 2.0, "tokens_per_s": 1.0, "steps_per_s": 1.0, "controller_overhead_ms_per_step": 0.1,
         "setup_s": 1.0, "faults": [], "replicas_identical": True, "replica_checksums": {0: "ab"},
         "interrupted": False, "sample": "", "summary_path": "x/summary.json"}
    return {**s, **over}


def test_a_failed_run_exits_1_with_nothing_on_stdout(monkeypatch, capsys):
    _fake_run(monkeypatch, RuntimeError("the mesh could not start"))
    assert _cli.main(["train", "--device", "cpu", "--json"]) == _cli.EXIT_FAILED == 1
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == "monarch-cy train: failed: RuntimeError: the mesh could not start\n"


def test_replicas_that_differ_exit_1_with_the_summary(monkeypatch, capsys):
    _fake_run(monkeypatch, _summary(replicas_identical=False, replica_checksums={0: "ab", 1: "cd"}))
    assert _cli.main(["train", "--device", "cpu", "--json"]) == _cli.EXIT_FAILED
    cap = capsys.readouterr()
    assert json.loads(cap.out)["replicas_identical"] is False
    assert "checksums differ" in cap.err


def test_interrupts_exit_130(monkeypatch, capsys):
    _fake_run(monkeypatch, _summary(interrupted=True))
    assert _cli.main(["train", "--device", "cpu"]) == _cli.EXIT_INTERRUPTED == 130
    assert capsys.readouterr().out.startswith("trained 3 steps")
    _fake_run(monkeypatch, KeyboardInterrupt())               # before the loop caught it
    assert _cli.main(["train", "--device", "cpu", "--json"]) == 130
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == "monarch-cy train: interrupted\n"


# -- stdout is the result, everything else stderr

def test_progress_goes_to_stderr(capsys):
    p = Progress(total=3, mode="lines", every=1)
    p.update(0, 3.5, 100.0)
    p.note("injecting fault")
    p.close()
    cap = capsys.readouterr()
    assert cap.out == ""
    assert "step     0/3  loss 3.5000" in cap.err and "injecting fault" in cap.err


def test_result_stream_swaps_stdout_for_stderr(capsys):
    with _cli.result_stream(True) as out:
        print("a progress line")
        print('{"doc": 1}', file=out)
    print("after")
    cap = capsys.readouterr()
    assert cap.out == '{"doc": 1}\nafter\n'
    assert cap.err == "a progress line\n"
    with _cli.result_stream(False) as out:
        assert out is sys.stdout


def test_train_json_puts_exactly_one_document_on_stdout(tmp_path):
    r = _run("train", *TINY, "--progress", "lines", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)                 # the whole of stdout is one document
    assert doc["steps_completed"] == 3 and doc["replicas_identical"] is True
    assert doc == {**json.loads((tmp_path / "summary.json").read_text()),
                   "summary_path": doc["summary_path"], "plot_path": doc["plot_path"]}
    assert "step     2/3" in r.stderr          # progress still shows, on stderr


WORKER_SCRIPT = '''
import json, os, sys, time
from monarch_cy._cli import result_stream
from monarch_cy.actor import Actor, endpoint, this_host

class Talker(Actor):
    @endpoint
    def talk(self):
        print("worker print")
        sys.stdout.flush()
        os.write(1, b"worker fd 1\\n")
        return 7

if __name__ == "__main__":
    with result_stream(True) as out:
        print("controller print", flush=True)
        os.write(1, b"controller fd 1\\n")
        procs = this_host().spawn_procs(per_host={"procs": 1})
        assert list(procs.spawn("talker", Talker).talk.call().get(60).values()) == [7]
        time.sleep(0.5)                        # the forwarded line travels on its own
        procs.stop().get(60)
        print(json.dumps({"ok": True}), file=out)
'''


def test_json_mode_sends_worker_output_to_stderr(tmp_path):
    """What the trainers print reaches the controller (``_actor/logs.py``) and is written
    to ``sys.stdout`` there, or written by them to the inherited fd 1: under
    ``--json`` both must land on stderr."""
    path = tmp_path / "prog.py"
    path.write_text(WORKER_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == '{"ok": true}\n'
    for line in ("controller print", "controller fd 1", "[talker] [0] worker print", "worker fd 1"):
        assert line in r.stderr, (line, r.stderr)


# -- info --json: the documented shape

_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict,
          "array of strings": list, "array of objects": list}


def _documented() -> dict[str, str]:
    """key path -> type, from docs/cli.md's table for ``info --json``."""
    section = (ROOT / "docs" / "cli.md").read_text().split("## `monarch-cy info --json`", 1)[1]
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+?) \|", section, re.M)
    assert rows, "docs/cli.md has no key table for info --json"
    return dict(rows)


def _flatten(obj: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in obj.items():
        out[prefix + k] = v
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, dict):
                    out.update(_flatten(item, f"{prefix}{k}[]."))
    return out


def _fake_device():
    props = SimpleNamespace(name="NVIDIA H200", pci_bus_id="0000:19:00.0", total_memory=141 * 2**30,
                            arch="sm_90", compute_capability=(9, 0), multiprocessor_count=132)
    return _info._device_entry(0, props)


def _check_type(key, value, doc_type):
    base, _, nullable = doc_type.partition(" or ")
    if value is None:
        assert nullable == "null", f"{key} is null but documented as {doc_type!r}"
        return
    assert base in _TYPES, f"{key}: unknown type {doc_type!r} in docs/cli.md"
    assert isinstance(value, _TYPES[base]), f"{key} = {value!r} is not {doc_type!r}"
    if base in ("integer", "number"):
        assert not isinstance(value, bool), f"{key} = {value!r} is not {doc_type!r}"
    if base == "array of strings":
        assert all(isinstance(x, str) for x in value), f"{key} = {value!r} is not {doc_type!r}"
    if base == "array of objects":
        assert all(isinstance(x, dict) for x in value), f"{key} = {value!r} is not {doc_type!r}"


def _raise(e):
    def f(*_):
        raise e
    return f


@pytest.mark.parametrize("case", ["this machine", "gpu off", "bad variable"])
def test_info_json_has_exactly_the_documented_keys(case, monkeypatch):
    """Bound or not, valid variable or not: the same keys, of the documented types."""
    if case == "gpu off":
        monkeypatch.setattr(_info._runtime, "requested_platform", lambda: "none")
        monkeypatch.setattr(_info._runtime, "ensure_bound", _raise(RuntimeError("switched off")))
    elif case == "bad variable":
        monkeypatch.setattr(_info._runtime, "requested_platform", _raise(ValueError("not a platform")))
    rep = _info.report()
    rep["gpu"]["devices"] = rep["gpu"]["devices"] or [_fake_device()]
    doc = _documented()
    got = _flatten(rep)
    assert set(got) == set(doc), (
        f"undocumented keys: {sorted(set(got) - set(doc))}; documented but absent: {sorted(set(doc) - set(got))}")
    for key, value in got.items():
        _check_type(key, value, doc[key])
    assert rep["schema"] == _info.SCHEMA == 1
    json.dumps(rep)                                      # and it serializes
    assert _info.format_report(rep).startswith(f"monarch_cy {monarch_cy.__version__}")


def test_info_json_on_the_command_line():
    r = _run("info", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["schema"] == 1 and rep["monarch_cy"] == monarch_cy.__version__
    top = {k for k in _documented() if "." not in k}
    assert set(rep) == top


def test_a_closed_stdout_is_no_traceback_and_python_m_works():
    import os
    import subprocess
    import sys
    r, w = os.pipe()
    os.close(r)                  # the reader is gone before anything is written
    try:
        proc = subprocess.run([sys.executable, "-m", "monarch_cy", "info"], stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "monarch-cy info: standard output was closed" in proc.stderr


def test_info_probes_nccl_where_the_loader_would(monkeypatch, tmp_path):
    from monarch_cy import _info
    missing = str(tmp_path / "libnccl.so.2")
    monkeypatch.setenv("MONARCH_CY_NCCL_LIBRARY", missing)
    r = _info._nccl_report(None)
    assert r["available"] is False and r["tried"] and r["tried"][0].startswith(missing)
