"""Chaos: >= 10,000 calls across 8 actors while >= 20 random workers are SIGKILLed
and respawned.  Every call resolves (a result or SupervisionError), nothing hangs,
calls on ranks that were not failing always succeed, no orphans remain."""

import os
import random
import signal
import time

import pytest

from _actors import Victim
from _leakcheck import children
from monarch_cy.actor import SupervisionError, this_host
import monarch_cy.actor as api

N_ACTORS = 8
N_CALLS = 10_000
N_KILLS = 24
WAVE = 200


@pytest.mark.timeout(120)
def test_chaos(monkeypatch):
    faults = []
    monkeypatch.setattr(api, "unhandled_fault_hook", faults.append)
    rng = random.Random(int(os.environ.get("MONARCH_CY_CHAOS_SEED", "1234")))
    t0 = time.monotonic()
    pm = this_host().spawn_procs(per_host={"gpus": N_ACTORS})
    m = pm.spawn("chaos", Victim)
    ranks = [m.slice(gpus=r) for r in range(N_ACTORS)]
    pids = dict(enumerate(m.pid.call().get(30).values()))
    epoch = [0] * N_ACTORS               # bumped when a rank is killed
    down = set()                         # killed, respawn not finished
    respawns = []                        # (rank, future)
    counts = {"ok": 0, "supervision": 0, "mesh_ok": 0, "mesh_supervision": 0}
    kills = 0
    kill_every = N_CALLS // (N_KILLS + 1)
    issued = 0
    while issued < N_CALLS:
        wave = []
        for i in range(WAVE):
            if issued and issued % kill_every == 0 and kills < N_KILLS:
                live = [r for r in range(N_ACTORS) if r not in down]
                r = rng.choice(live)
                os.kill(pids[r], signal.SIGKILL)
                epoch[r] += 1
                down.add(r)
                kills += 1
                respawns.append((r, None))
            r = rng.randrange(N_ACTORS)
            wave.append((r, epoch[r], r in down, ranks[r].ping.call_one(issued)))
            issued += 1
            if issued % 500 == 0:          # a mesh-wide call now and then
                wave.append((None, list(epoch), bool(down), m.ping.call(issued)))
        # start respawns of the ranks killed during this wave (the failure must be
        # detected first: respawn restarts failed ranks only)
        for k, (r, fut) in enumerate(respawns):
            if fut is None:
                end = time.monotonic() + 5
                while True:
                    try:
                        fut = pm.respawn([r])
                        break
                    except ValueError:       # not detected yet
                        assert time.monotonic() < end, f"rank {r} death not detected"
                        time.sleep(0.005)
                respawns[k] = (r, fut)
        for r, ep, was_down, f in wave:
            try:
                v = f.get(30)
            except SupervisionError:
                if r is None:
                    assert was_down or ep != epoch, "a mesh call failed with no kill"
                    counts["mesh_supervision"] += 1
                else:
                    assert was_down or ep != epoch[r], \
                        f"call on healthy rank {r} failed"
                    counts["supervision"] += 1
                continue
            counts["mesh_ok" if r is None else "ok"] += 1
        still = []
        for r, fut in respawns:
            if fut.done():
                assert fut.get(0) == [r]
                pids[r] = ranks[r].pid.call_one().get(30)
                down.discard(r)
            else:
                still.append((r, fut))
        respawns = still
    for r, fut in respawns:
        assert fut.get(60) == [r]
        pids[r] = ranks[r].pid.call_one().get(30)
        down.discard(r)
    # survivors and the respawned all serve
    assert m.ping.call("end").get(30).values() == ["end"] * N_ACTORS
    kids = set(children())
    assert set(pids.values()) <= kids
    assert len(kids & set(pids.values())) == N_ACTORS
    pm.stop().get(30)
    left = set(pids.values()) & set(children())
    assert not left, f"procs left after stop: {left}"
    took = time.monotonic() - t0
    total = sum(counts.values())
    print(f"\nchaos: {total} calls ({counts['ok']} ok, {counts['supervision']} "
          f"SupervisionError; mesh-wide {counts['mesh_ok']} ok, "
          f"{counts['mesh_supervision']} SupervisionError) across {N_ACTORS} actors, "
          f"{kills} SIGKILLs respawned, {len(faults)} reached the fault hook, "
          f"{took:.1f} s")
    assert total >= N_CALLS and kills >= 20
