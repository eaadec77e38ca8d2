"""monarch_cy._config: every MONARCH_CY_* variable declared once, typed, validated.

The last tests keep the declaration honest: every ``MONARCH_CY_*`` name in the
sources must be declared, every declared package variable must be read somewhere,
and docs/configuration.md must hold the table printed from the declaration.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from monarch_cy import _config

ROOT = Path(__file__).resolve().parents[1]
P = "MONARCH_CY_"          # names below are built from it, so this file names no variable

# accessor -> (variable suffix, default, a good raw value, what it parses to)
ACCESSORS = {
    _config.job_secret: ("JOB_SECRET", None, " ab" * 3, "ab ab ab"),
    _config.job_secret_file: ("JOB_SECRET_FILE", None, " /run/s ", "/run/s"),
    _config.host: ("HOST", None, "10.0.0.7", "10.0.0.7"),
    _config.host_address: ("HOST_ADDRESS", None, "10.0.0.8", "10.0.0.8"),
    _config.controller_interface: ("CONTROLLER_INTERFACE", None, " ib0 ", "ib0"),
    _config.controller_ports: ("CONTROLLER_PORTS", None, " 29000 - 29009 ", (29000, 29009)),
    _config.agent_rank: ("AGENT_RANK", None, "3", 3),
    _config.host_timeout: ("HOST_TIMEOUT", 10.0, "2.5", 2.5),
    _config.attach_timeout: ("ATTACH_TIMEOUT", 30.0, "7", 7.0),
    _config.gpu_platform: ("GPU_PLATFORM", "auto", " ROCm ", "rocm"),
    _config.gpu_runtime_library: ("GPU_RUNTIME_LIBRARY", None, "/x/libcudart.so.13",
                                  "/x/libcudart.so.13"),
    _config.nccl_library: ("NCCL_LIBRARY", None, "/x/libnccl.so.2", "/x/libnccl.so.2"),
    _config.rdma_backend: ("RDMA_BACKEND", "auto", "TCP", "tcp"),
    _config.rdma_verbs: ("RDMA_VERBS", True, "0", False),
    _config.rdma_device: ("RDMA_DEVICE", None, "rxe0", "rxe0"),
    _config.rdma_cma_threads: ("RDMA_CMA_THREADS", 2, "3", 3),
    _config.transport: ("TRANSPORT", "unix", "ipc", "ipc"),
    _config.auth_timeout: ("AUTH_TIMEOUT", 5.0, "0.25", 0.25),
    _config.start_method: ("START", "fork", "Exec", "exec"),
    _config.pin_gpus: ("PIN_GPUS", None, "1", True),
    _config.gpu_coord: ("GPU_COORD", None, "3", 3),
    _config.gpu_unpinned: ("GPU_UNPINNED", None, '{"CUDA_VISIBLE_DEVICES": null}',
                           '{"CUDA_VISIBLE_DEVICES": null}'),
    _config.heartbeat_timeout: ("HEARTBEAT_TIMEOUT", 10.0, "0", 0.0),
    _config.run_dir: ("RUN_DIR", None, "/x/run", "/x/run"),
    _config.cast_fanout: ("CAST_FANOUT", 16, " 4 ", 4),
    _config.cast_nogil: ("CAST_NOGIL", True, "0", False),
    _config.interleave: ("INTERLEAVE", False, "1", True),
    _config.supervise_timeout: ("SUPERVISE_TIMEOUT", 10.0, "0.5", 0.5),
    _config.cleanup_timeout: ("CLEANUP_TIMEOUT", 3.0, "25", 25.0),
    _config.max_message_bytes: ("MAX_MESSAGE_BYTES", 10737418240, " 1048576 ", 1048576),
    _config.rdma_ibverbs_target: ("RDMA_IBVERBS_TARGET", None, " nic:mlx5_0 ", "nic:mlx5_0"),
    _config.monarch_config: ("MONARCH_CONFIG", None, '{"tail_log_lines": 5}',
                             '{"tail_log_lines": 5}'),
    _config.fault_grace: ("FAULT_GRACE", 1.0, "0.2", 0.2),
    _config.fault_hook_skips_seen: ("FAULT_HOOK_SKIPS_SEEN", False, "1", True),
    _config.log_level: ("LOG_LEVEL", None, " Debug ", "debug"),
    _config.telemetry: ("TELEMETRY", False, " 1 ", True),
    _config.telemetry_otlp_endpoint: ("TELEMETRY_OTLP_ENDPOINT", None, " http://c:4318 ",
                                      "http://c:4318"),
    _config.tail_log_lines: ("TAIL_LOG_LINES", None, " 5 ", 5),
    _config.keep_failed_logs: ("KEEP_FAILED_LOGS", True, "0", False),
    _config.debug_console: ("DEBUG_CONSOLE", "auto", " OFF ", "off"),
    _config.rank: ("RANK", None, "5", 5),
    _config.world_size: ("WORLD_SIZE", None, "8", 8),
}

# variable suffix -> values that must be refused
BAD = {
    "AGENT_RANK": ["-1", "x", "1.0"],
    "CONTROLLER_PORTS": ["29000", "9-3", "0-10", "1-65536", "a-b", "1-2-3"],
    "HOST_TIMEOUT": ["abc", "0", "-3", "nan"],
    "ATTACH_TIMEOUT": ["0", "soon"],
    "GPU_PLATFORM": ["vulkan", "cuda,rocm"],
    "RDMA_BACKEND": ["carrier-pigeon"],
    "RDMA_VERBS": ["off", "2", "yes"],
    "RDMA_CMA_THREADS": ["two", "2.5"],
    "TRANSPORT": ["udp"],
    "START": ["spawn"],
    "AUTH_TIMEOUT": ["0", "-1", "soon"],
    "PIN_GPUS": ["true"],
    "HEARTBEAT_TIMEOUT": ["abc", "-1", "nan"],
    "SUPERVISE_TIMEOUT": ["-0.1", "ten"],
    "CLEANUP_TIMEOUT": ["-1", "3s"],
    "MAX_MESSAGE_BYTES": ["-1", "1MiB", "1e6"],
    "FAULT_GRACE": ["x"],
    "RANK": ["-2", "r0"],
    "WORLD_SIZE": ["0", "many"],
}


@pytest.fixture
def env(monkeypatch):
    for name in _config.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_accessors_cover_every_package_variable():
    package_vars = {n for n, v in _config.VARIABLES.items() if v.who != _config.TESTS}
    assert {P + a[0] for a in ACCESSORS.values()} == package_vars
    assert all(v.who in (_config.USER, _config.INTERNAL, _config.TESTS)
               for v in _config.VARIABLES.values())
    internal = {n for n, v in _config.VARIABLES.items() if v.who == _config.INTERNAL}
    assert internal == {P + "RANK", P + "WORLD_SIZE", P + "GPU_COORD", P + "GPU_UNPINNED",
                        P + "MONARCH_CONFIG"}


@pytest.mark.parametrize("fn", list(ACCESSORS), ids=lambda f: f.__name__)
def test_default_when_unset_or_blank(env, fn):
    suffix, default, _, _ = ACCESSORS[fn]
    assert fn() == default
    assert _config.get(P + suffix) == default
    env.setenv(P + suffix, "   ")
    assert fn() == default


@pytest.mark.parametrize("fn", list(ACCESSORS), ids=lambda f: f.__name__)
def test_parses_a_good_value(env, fn):
    suffix, _, raw, parsed = ACCESSORS[fn]
    env.setenv(P + suffix, raw)
    assert fn() == parsed and type(fn()) is type(parsed)


def test_read_at_call_time_not_import(env):
    assert _config.host_timeout() == 10.0
    env.setenv(P + "HOST_TIMEOUT", "3")
    assert _config.host_timeout() == 3.0
    env.setenv(P + "HOST_TIMEOUT", "4")
    assert _config.host_timeout() == 4.0


@pytest.mark.parametrize("suffix, raw", [(s, r) for s, rs in BAD.items() for r in rs])
def test_bad_value_names_the_variable_and_the_value(env, suffix, raw):
    env.setenv(P + suffix, raw)
    with pytest.raises(ValueError) as ei:
        _config.get(P + suffix)
    assert str(ei.value).startswith(f"{P}{suffix}={raw!r} ")


def test_messages_say_what_is_wanted(env):
    cases = [("HOST_TIMEOUT", "abc", "must be a positive number of seconds"),
             ("HEARTBEAT_TIMEOUT", "-1", "must be a number of seconds >= 0"),
             ("GPU_PLATFORM", "vulkan", "is not a platform; use one of cuda, rocm, none, auto"),
             ("RDMA_BACKEND", "x", "is not a backend; use one of auto, local, cma, ipc, "
                                   "ibverbs, tcp"),
             ("TRANSPORT", "udp", "is not a transport; use one of unix, ipc, tcp"),
             ("PIN_GPUS", "yes", "must be 0 or 1"),
             ("WORLD_SIZE", "0", "must be an int >= 1"),
             ("RDMA_CMA_THREADS", "two", "must be an int"),
             ("CONTROLLER_PORTS", "9-3", "must be a port range A-B with 1 <= A <= B "
                                         "<= 65535")]
    for suffix, raw, want in cases:
        env.setenv(P + suffix, raw)
        with pytest.raises(ValueError, match=re.escape(f"{P}{suffix}={raw!r} {want}")):
            _config.get(P + suffix)


def test_seconds_edges(env):
    env.setenv(P + "HEARTBEAT_TIMEOUT", "0")
    assert _config.heartbeat_timeout() == 0.0           # 0: heartbeats off
    env.setenv(P + "HOST_TIMEOUT", "inf")
    assert _config.host_timeout() == float("inf")
    env.setenv(P + "HOST_TIMEOUT", " 1e-3 ")
    assert _config.host_timeout() == 0.001


def test_cma_threads_clamped_to_1_to_4(env):
    for raw, want in [("0", 1), ("-5", 1), ("1", 1), ("4", 4), ("64", 4)]:
        env.setenv(P + "RDMA_CMA_THREADS", raw)
        assert _config.rdma_cma_threads() == want


def test_get_reads_a_given_mapping_and_refuses_undeclared_names():
    assert _config.get(P + "TRANSPORT", {P + "TRANSPORT": "TCP"}) == "tcp"
    assert _config.get(P + "TRANSPORT", {}) == "unix"
    with pytest.raises(KeyError):
        _config.get(P + "NOT_DECLARED")
    assert not _config.declared(P + "NOT_DECLARED") and _config.declared(P + "RANK")


def test_secret_value_never_in_the_message(env):
    from monarch_cy._transport.secret import load_secret
    env.setenv(P + "JOB_SECRET", "s3cr3t-value")
    with pytest.raises(ValueError) as ei:
        load_secret()
    assert "s3cr3t" not in str(ei.value) and P + "JOB_SECRET" in str(ei.value)


def test_callers_use_the_declaration(env):
    """A few converted readers, end to end: same values, same errors as before."""
    from monarch_cy import _runtime
    from monarch_cy._hosts import attach, protocol
    from monarch_cy._rdma_buffer import _select
    env.setenv(P + "GPU_PLATFORM", "CUDA13")
    with pytest.raises(ValueError, match=re.escape(f"{P}GPU_PLATFORM='CUDA13' is not a platform")):
        _runtime.requested_platform()
    env.setenv(P + "RDMA_BACKEND", " IBVerbs ")
    assert _select.requested(None) == "ibverbs"
    env.setenv(P + "HOST_TIMEOUT", "x")
    with pytest.raises(ValueError, match=re.escape(f"{P}HOST_TIMEOUT='x' must be a positive")):
        protocol.host_timeout()
    assert attach.attach_timeout() == 30.0


# ---------------------------------------------------------------- the table stays true

NAME = re.compile(P + r"[A-Z0-9_]*[A-Z0-9]")


def _names_in(paths) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in paths:
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for name in NAME.findall(line):
                found.setdefault(name, []).append(f"{path.relative_to(ROOT)}:{i}")
    return found


def _package_sources():
    pkg = ROOT / "monarch_cy"
    files = [p for ext in ("py", "pyx", "pxd") for p in pkg.rglob(f"*.{ext}")]
    return [p for p in files if "__pycache__" not in p.parts] + [ROOT / "setup.py"]


def test_every_name_in_the_package_is_declared():
    found = _names_in(_package_sources())
    undeclared = {n: w for n, w in found.items() if not _config.declared(n)}
    assert not undeclared, f"declare these in monarch_cy/_config.py: {undeclared}"


def test_every_name_in_tests_docs_and_scripts_is_declared():
    dirs = ["tests", "bench", "scripts", "deploy", "docs", "examples"]
    files = [p for d in dirs for p in (ROOT / d).rglob("*") if p.is_file()
             and p.suffix in (".py", ".sh", ".md", ".yaml", ".yml")]
    found = _names_in(files + [ROOT / "README.md"])
    # a prefix in a filter (``k.startswith(P + "JOB")``) counts when it begins a declared name
    undeclared = {n: w for n, w in found.items()
                  if not any(d.startswith(n) for d in _config.VARIABLES)}
    assert not undeclared, f"declare these in monarch_cy/_config.py: {undeclared}"


def test_every_declared_package_variable_is_used_somewhere():
    """By name, or through its accessor (``_config.host_timeout()``)."""
    sources = [p for p in _package_sources() if p.name != "_config.py"]
    found = _names_in(sources)
    text = "\n".join(p.read_text(errors="replace") for p in sources)
    stale = [P + suffix for fn, (suffix, *_) in ACCESSORS.items()
             if P + suffix not in found and f"_config.{fn.__name__}()" not in text]
    assert not stale, f"declared but never used by the package: {stale}"


def test_docs_hold_the_printed_table():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    assert _config.markdown_table() in doc, \
        "docs/configuration.md is stale: paste in `python -m monarch_cy._config`"
    rows = [line for line in doc.splitlines() if line.startswith(f"| `{P}")]
    assert len(rows) == len(_config.VARIABLES)
    out = subprocess.run([sys.executable, "-m", "monarch_cy._config"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert out == _config.markdown_table()


def test_import_is_light():
    code = ("import sys; before = set(sys.modules); import monarch_cy._config, "
            "monarch_cy._checks; print(sorted(set(sys.modules) - before))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    new = set(eval(out))
    ours = {m for m in new if m.split(".")[0] == "monarch_cy"}
    assert ours <= {"monarch_cy", "monarch_cy._errors", "monarch_cy.errors",
                    "monarch_cy._config", "monarch_cy._checks"}, ours
    assert new - ours <= {"__future__", "operator", "_operator"}, new - ours
