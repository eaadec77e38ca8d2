"""Supervision figures: detection latency and recovery time, plus a long chaos run.

    PYTHONPATH=. python bench/bench_supervision.py [--rounds 60] [--procs 8]
        [--chaos-calls 50000] [--chaos-kills 100]

* detection (SIGKILL): a call is pending on rank r (its actor sleeps); the worker is
  SIGKILLed; time from ``kill()`` to the pending ``get()`` raising
  ``SupervisionError``.  p50/p99 over ``--rounds``.
* detection (SIGSTOP, heartbeat): the same with SIGSTOP, on a mesh with
  ``heartbeat_timeout=0.5``: the figure is the timeout plus the detection path.
* recovery: from ``kill()`` to ``respawn([r])`` resolved (``__init__`` re-run) and the
  first call on the new actor answered; p50/p99.
* chaos: calls to random ranks while random workers are SIGKILLed and respawned;
  counts and throughput, like tests/actor/test_chaos.py but longer.

Anchor: Monarch detects a dead proc but never restarts it (recovery: none); the
target in BENCHMARKS.md is "back to training <= 5 s on CPU".
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "tests", "actor"))

from monarch_cy.actor import SupervisionError, this_host  # noqa: E402

import monarch_cy.actor as api  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def summary(name, xs):
    ms = [x * 1e3 for x in xs]
    print(f"{name:<34} n={len(ms):<4} p50 {pct(ms, 50):8.1f} ms   p99 {pct(ms, 99):8.1f} ms"
          f"   max {max(ms):8.1f} ms   mean {statistics.mean(ms):8.1f} ms")


def detection_and_recovery(n_procs, rounds, rng):
    from _actors import Victim
    pm = this_host().spawn_procs(per_host={"gpus": n_procs})
    m = pm.spawn("bench", Victim)
    pids = dict(enumerate(m.pid.call().get(60).values()))
    detect, recover = [], []
    for _ in range(rounds):
        r = rng.randrange(n_procs)
        one = m.slice(gpus=r)
        pending = one.sleep.call_one(60)
        time.sleep(0.02)
        t0 = time.perf_counter()
        os.kill(pids[r], signal.SIGKILL)
        try:
            pending.get(30)
            raise AssertionError("the pending call did not fail")
        except SupervisionError:
            detect.append(time.perf_counter() - t0)
        pm.respawn([r]).get(60)
        pids[r] = one.pid.call_one().get(30)
        recover.append(time.perf_counter() - t0)
    pm.stop().get(30)
    return detect, recover


def heartbeat_detection(rounds, timeout=0.5):
    from _actors import Victim
    pm = this_host().spawn_procs(per_host={"gpus": 1}, heartbeat_timeout=timeout)
    m = pm.spawn("hb", Victim)
    lat = []
    for _ in range(rounds):
        pid = m.pid.call_one().get(30)
        pending = m.sleep.call_one(60)
        time.sleep(0.02)
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGSTOP)
        try:
            pending.get(30)
        except SupervisionError:
            lat.append(time.perf_counter() - t0)
        pm.respawn([0]).get(60)
    pm.stop().get(30)
    return lat


def chaos(n_procs, n_calls, n_kills, rng):
    from _actors import Victim
    pm = this_host().spawn_procs(per_host={"gpus": n_procs})
    m = pm.spawn("chaos", Victim)
    ranks = [m.slice(gpus=r) for r in range(n_procs)]
    pids = dict(enumerate(m.pid.call().get(60).values()))
    ok = sup = kills = 0
    every = n_calls // (n_kills + 1)
    issued, pending_respawn = 0, []
    t0 = time.perf_counter()
    while issued < n_calls:
        wave = []
        for _ in range(500):
            if issued and issued % every == 0 and kills < n_kills:
                busy = {r for r, _ in pending_respawn}
                r = rng.choice([x for x in range(n_procs) if x not in busy])
                os.kill(pids[r], signal.SIGKILL)
                kills += 1
                pending_respawn.append((r, None))
            r = rng.randrange(n_procs)
            wave.append(ranks[r].ping.call_one(issued))
            issued += 1
        for k, (r, f) in enumerate(pending_respawn):
            while f is None:
                try:
                    f = pm.respawn([r])
                except ValueError:
                    time.sleep(0.002)
            pending_respawn[k] = (r, f)
        for f in wave:
            try:
                f.get(60)
                ok += 1
            except SupervisionError:
                sup += 1
        left = []
        for r, f in pending_respawn:
            if f.done():
                f.get(0)
                pids[r] = ranks[r].pid.call_one().get(30)
            else:
                left.append((r, f))
        pending_respawn = left
    for r, f in pending_respawn:
        f.get(60)
    took = time.perf_counter() - t0
    assert m.ping.call(1).get(30).values() == [1] * n_procs
    pm.stop().get(30)
    print(f"chaos: {ok + sup} calls ({ok} ok, {sup} SupervisionError) across {n_procs} "
          f"actors, {kills} SIGKILLs respawned, {took:.1f} s, "
          f"{(ok + sup) / took:,.0f} calls/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--hb-rounds", type=int, default=10)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--chaos-calls", type=int, default=50_000)
    ap.add_argument("--chaos-kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    api.unhandled_fault_hook = lambda failure: None   # every failure here is expected
    rng = random.Random(a.seed)
    detect, recover = detection_and_recovery(a.procs, a.rounds, rng)
    summary("detection, SIGKILL -> error", detect)
    summary("recovery, SIGKILL -> serving again", recover)
    if a.hb_rounds:
        summary("detection, SIGSTOP (heartbeat 0.5 s)", heartbeat_detection(a.hb_rounds))
    if a.chaos_calls:
        chaos(a.procs, a.chaos_calls, a.chaos_kills, rng)


if __name__ == "__main__":
    main()
