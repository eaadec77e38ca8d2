"""The gloo path with 4 real processes: every op, several dtypes, splits, a stuck
peer (timeout) and a dead peer (error, not hang).  One run of 4 processes
(tests/collectives/_gloo_worker.py); each test checks one part of its results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monarch_cy.collectives import pick_free_port

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_gloo_worker.py")
WORLD = 4
DTYPES = ["torch.float32", "torch.float64", "torch.int32", "torch.int64", "torch.bfloat16"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("gloo4")
    port = pick_free_port("127.0.0.1")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    procs = [
        subprocess.Popen([sys.executable, str(WORKER), str(r), str(WORLD), str(port), str(out)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for r in range(WORLD)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=90)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    errs = {f.name: f.read_text() for f in out.glob("*.err")}
    assert not errs, f"worker failures: {errs}\n{logs}"
    res = {}
    for r in range(WORLD):
        f = out / f"{r}.json"
        assert f.exists(), f"rank {r} wrote no results; logs: {logs[r][-2000:]}"
        res[r] = json.loads(f.read_text())
    return res


def test_ranks(results):
    assert [results[r]["rank_size"] for r in range(WORLD)] == [[r, WORLD] for r in range(WORLD)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce_every_op(results, dtype):
    integer = "int" in dtype
    expect = {"sum": 10, "avg": 2 if integer else 2.5, "max": 4, "min": 1, "prod": 24}
    for r in range(WORLD):
        for op, v in expect.items():
            assert results[r][f"all_reduce/{dtype}/{op}"] == [v] * 5, (r, op)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_reduce_gather_scatter(results, dtype):
    for r in range(WORLD):
        assert results[r][f"broadcast/{dtype}"] == [20.0] * 3
        assert results[r][f"all_gather/{dtype}"] == [[i, 2 * i] for i in range(WORLD)]
        # sum over ranks of (arange(8) + rank), rank r's slice
        full = [sum(j + k for k in range(WORLD)) for j in range(WORLD * 2)]
        assert results[r][f"reduce_scatter/{dtype}"] == full[2 * r: 2 * r + 2]
    assert results[1][f"reduce/{dtype}"] == [10.0] * 3


def test_async_send_recv(results):
    for r in range(WORLD):
        assert results[r]["async"] == [[4.0] * 4, True]
        assert results[r]["recv"] == [(r - 1) % WORLD] * 3


def test_mismatch_detected_with_check(results):
    for r in range(WORLD):
        assert "ranks disagree" in results[r]["mismatch"], results[r]["mismatch"]


def test_split(results):
    # even ranks {0, 2}, odd {1, 3}; key=-rank reverses the order
    assert results[0]["split"] == [1, 2, 2.0]
    assert results[2]["split"] == [0, 2, 2.0]
    assert results[1]["split"] == [1, 2, 4.0]
    assert results[3]["split"] == [0, 2, 4.0]
    assert [results[r]["split_none"] for r in range(WORLD)] == [False, False, False, True]


def test_stuck_peer_times_out_and_aborts(results):
    kind, seconds, _ = results[0]["stuck"]
    assert kind == "CollectiveTimeout"
    assert 1.5 <= seconds < 10
    assert results[0]["after_abort"] == "GroupAbortedError"


def test_dead_peer_is_an_error_in_bounded_time(results):
    for r in range(WORLD - 1):
        kind, seconds, text = results[r]["dead_peer"]
        assert kind in ("CollectiveError", "CollectiveTimeout"), text
        assert seconds < 20, (r, seconds)
        assert results[r]["closed_after"] is True
