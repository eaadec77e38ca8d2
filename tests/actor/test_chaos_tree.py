"""Chaos down the cast tree (issue 35, "How it is checked"): 64 procs at fan-out 4,
once with casts passed on and replies gathered by the procs' nogil forwarders (the
default on one host) and once by the heads' I/O threads (``MONARCH_CY_CAST_NOGIL=0``,
the path of meshes across hosts).

While two threads keep mesh-wide calls, slice calls, folds (``Accumulator(...,
merge=)``, folded by the heads), broadcasts and ``call_one``s to random ranks in
flight, a third SIGKILLs heads (ranks that forward for others, from the tree's
``Plan``) and leaves, alone and in pairs (a head with a rank below it, a top head
with a head below it), and respawns them.  Checked:

* every future resolves within its bound: a value, or ``SupervisionError`` /
  ``ActorError``; no ``TimeoutError``, no ``KeyError`` or other exception, when
  sending or when getting;
* every value is right (each rank's own rank and argument; the fold's sum);
* a failure only where a kill overlapped the call (between a SIGKILL and the end of
  its respawn); a broadcast sent and followed by a call with no kill overlapping
  reached every rank (per-sender FIFO); each incarnation received broadcasts in the
  order sent, none twice;
* after a final ``ProcMesh.stop()`` every live actor ran ``__cleanup__``: one marker
  file for each rank's last incarnation.

The body runs in a controller of its own (as test_chaos_failures does), with the
fan-out set in its environment.
"""

from __future__ import annotations

import operator
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

import monarch_cy.actor as api
from _actors import TreeChaos
from monarch_cy.actor import Accumulator, ActorError, SupervisionError, this_host

N, K = 64, 4
CALL_BOUND = 30.0          # seconds a call may take to resolve, from its send
DETECT_BOUND = 20.0        # seconds for a SIGKILL to be noticed
RESPAWN_BOUND = 60.0
BODY_BOUND = 150.0         # the whole chaos phase


@pytest.mark.timeout(240)
@pytest.mark.parametrize("nogil", ["1", "0"], ids=["nogil_forwarders", "io_forwarders"])
def test_chaos_down_the_cast_tree(nogil):
    if os.environ.get("CHAOS_TREE_CHILD"):
        pytest.skip("this is the child run")
    env = dict(os.environ, CHAOS_TREE_CHILD="1", MONARCH_CY_CAST_FANOUT=str(K),
               MONARCH_CY_CAST_NOGIL=nogil)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         "--show-capture=no", f"{__file__}::test_chaos_tree_body"], capture_output=True,
        text=True, timeout=225, env=env, cwd=os.path.dirname(__file__))
    said = "\n".join(ln for ln in out.stdout.splitlines()
                     if ln.startswith(("chaos tree:", "errors:", "after a hang:")))
    print(said or out.stdout[-3000:])
    assert out.returncode == 0, said + "\n" + out.stdout[-6000:] + out.stderr[-3000:]
    assert "chaos tree:" in out.stdout, out.stdout[-3000:]


class Kills:
    """The kill log: ``[t_kill, t_back]`` per event (``t_back`` is None while the
    ranks are down).  A call failed "explained" when some event overlaps it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events = []

    def start(self, ranks):
        with self.lock:
            ev = [time.monotonic(), None, ranks]
            self.events.append(ev)
            return ev

    def overlaps(self, t0, t1):
        with self.lock:
            return any(a <= t1 and (b is None or b >= t0) for a, b, _ in self.events)


class Book:
    """What the callers saw."""

    def __init__(self, kills):
        self.kills = kills
        self.lock = threading.Lock()
        self.ok = {}               # kind -> count
        self.failed = {}           # kind -> count
        self.errors = []           # anything that breaks a property

    def count(self, table, kind):
        with self.lock:
            table[kind] = table.get(kind, 0) + 1

    def error(self, *what):
        with self.lock:
            self.errors.append(what)

    def send(self, kind, fn):
        """``fn()`` (a send); None when it raised a failure (counted, and checked as
        a failed call)."""
        t0 = time.monotonic()
        try:
            return fn()
        except (SupervisionError, ActorError) as e:
            self.failed_call(kind, t0, e)
        except BaseException as e:  # noqa: BLE001 - a stray exception is the finding
            self.error("stray at send", kind, type(e).__name__, repr(e)[:300])
        return None

    def failed_call(self, kind, t0, e):
        self.count(self.failed, kind)
        if not self.kills.overlaps(t0, time.monotonic()):
            self.error("failed with no kill overlapping", kind, type(e).__name__,
                       str(e)[:300])

    def settle(self, kind, t0, fut, check, detail=""):
        """Waits for ``fut`` (within CALL_BOUND of ``t0``) and checks its value with
        ``check(value, quiet)`` (quiet: no kill overlapped the call), which returns
        None or what is wrong."""
        try:
            v = fut.get(max(0.0, CALL_BOUND - (time.monotonic() - t0)))
        except (SupervisionError, ActorError) as e:
            self.failed_call(kind, t0, e)
            return
        except TimeoutError:
            self.error("hung", kind, f"unresolved {CALL_BOUND} s after its send",
                       _unanswered(fut), f"sent at {t0 - T0:.2f} s", detail,
                       "kills (start, back, ranks):",
                       [(round(a - T0, 2), b and round(b - T0, 2), r)
                        for a, b, r in self.kills.events])
            return
        except BaseException as e:  # noqa: BLE001 - a stray exception is the finding
            self.error("stray at get", kind, type(e).__name__, repr(e)[:300])
            return
        quiet = not self.kills.overlaps(t0, time.monotonic())
        wrong = check(v, quiet)
        if wrong:
            self.error("wrong value", kind, wrong)
        else:
            self.count(self.ok, kind)


T0 = time.monotonic()


def _unanswered(fut):
    """Which call ranks a hung future still waits for (from its collector)."""
    from monarch_cy._transport.node import current_node
    node = current_node()
    for pid in node.port_ids():
        col = node.port(pid)
        if getattr(col, "fut", None) is fut:
            got = getattr(col, "got", None)
            return ("waits for call ranks",
                    [i for i, g in enumerate(got) if not g] if got is not None else "?")
    return "no port registered for it"


def _echo_check(ranks, x, bcast=None):
    def check(v, quiet):
        vals = v.values()
        got = [(r, a) for r, a, _ in vals]
        if got != [(r, x) for r in ranks]:
            return f"echo({x}) on {ranks[0]}..{ranks[-1]}: {got[:6]}..."
        if bcast is not None and quiet and any(b != bcast for _, _, b in vals):
            return (f"broadcast {bcast} then a call, no kill between: last seen "
                    f"{[b for _, _, b in vals]}")
        return None
    return check


def _mesh_ops(m, book, stop, rng):
    """Mesh-wide and slice calls, folds and broadcasts, a few in flight at once."""
    fold = Accumulator(m.value, 0, operator.add, merge=operator.add)
    pending = []
    i = b = 0
    while not stop.is_set():
        i += 1
        op = i % 5
        t0 = time.monotonic()
        if op == 0:
            fut = book.send("call", lambda: m.echo.call(i))
            item = ("call", t0, fut, _echo_check(range(N), i))
        elif op == 1:
            fut = book.send("fold", lambda: fold.accumulate(i))
            item = ("fold", t0, fut, lambda v, q, i=i:
                    None if v == N * i + N * (N - 1) // 2 else f"fold({i}) = {v}")
        elif op == 2:
            b += 1
            book.send("broadcast", lambda: m.mark.broadcast(b))
            fut = book.send("call", lambda: m.echo.call(i))
            item = ("call after broadcast", t0, fut, _echo_check(range(N), i, b))
        elif op == 3:
            lo = rng.randrange(N - K - 1)
            hi = rng.randrange(lo + K + 1, N + 1)        # more than the fan-out: a tree
            fut = book.send("slice call", lambda: m.slice(gpus=slice(lo, hi)).echo.call(i))
            item = ("slice call", t0, fut, _echo_check(range(lo, hi), i), f"[{lo}, {hi})")
        else:
            lo = rng.randrange(N - K - 1)
            fut = book.send("slice fold", lambda: Accumulator(
                m.slice(gpus=slice(lo, N)).value, 0, operator.add,
                merge=operator.add).accumulate(i))
            want = (N - lo) * i + sum(range(lo, N))
            item = ("slice fold", t0, fut, lambda v, q, want=want:
                    None if v == want else f"slice fold {v} != {want}", f"[{lo}, {N})")
        if fut is not None:
            pending.append(item)
        if len(pending) > 3:
            book.settle(*pending.pop(0))
    for item in pending:
        book.settle(*item)
    return b


def _one_ops(m, book, stop, rng):
    """``call_one``s to random ranks, up to 16 in flight."""
    ranks = [m.slice(gpus=r) for r in range(N)]
    pending = []
    j = 0
    while not stop.is_set():
        j += 1
        r = rng.randrange(N)
        t0 = time.monotonic()
        fut = book.send("call_one", lambda: ranks[r].echo.call_one(j))
        if fut is not None:
            pending.append(("call_one", t0, fut, lambda v, q, r=r, j=j:
                            None if v[:2] == (r, j) else f"call_one({j}) on {r}: {v}",
                            f"rank {r}"))
        if len(pending) > 16:
            book.settle(*pending.pop(0))
        time.sleep(0.002)
    for item in pending:
        book.settle(*item)


def _kill_schedule(heads, leaves, below, rng):
    """Kill events (lists of ranks): heads and leaves alone, a head with a rank
    below it, a top head with a head below it."""
    sub = [h for h in heads if any(x in heads for x in below[h])]       # top heads
    events = [[h] for h in rng.sample(heads, 6)] + [[x] for x in rng.sample(leaves, 6)]
    for h in rng.sample(heads, 3):
        events.append([h, rng.choice(below[h])])
    for h in rng.sample(sub, 3):
        events.append([h, rng.choice([x for x in below[h] if x in heads])])
    rng.shuffle(events)
    return events


@pytest.mark.timeout(200)
def test_chaos_tree_body(monkeypatch, tmp_path):
    if not os.environ.get("CHAOS_TREE_CHILD"):
        pytest.skip("run by test_chaos_down_the_cast_tree in a controller of its own")
    from monarch_cy._actor.cast import tree as cast_tree
    assert cast_tree.fanout() == K
    assert cast_tree.nogil() == (os.environ["MONARCH_CY_CAST_NOGIL"] == "1")
    faults = []
    monkeypatch.setattr(api, "unhandled_fault_hook", faults.append)
    monkeypatch.setattr(api, "fault_hook_skips_seen", True)   # it handles what it sees
    seed = int(os.environ.get("MONARCH_CY_CHAOS_SEED", "35"))
    rng = random.Random(seed)
    t_start = time.monotonic()
    pm = this_host().spawn_procs(per_host={"gpus": N})
    try:
        _chaos(pm, pm.spawn("chaos_tree", TreeChaos, str(tmp_path)), tmp_path, cast_tree,
               seed, rng, t_start, faults)
    except BaseException:
        pm.stop().get(60)        # idempotent: the procs go whatever failed
        raise


def _chaos(pm, m, tmp_path, cast_tree, seed, rng, t_start, faults):
    pids = m.seen.call().get(60).values()
    assert [r for r, _, _ in pids] == list(range(N))
    pids = [p for _, p, _ in pids]
    plan = cast_tree.Plan(m._addrs, m._procs, range(N), K)
    below = {plan.rank_of[p]: sorted(m._procs.index(q) for q in qs)
             for p, qs in plan.below.items()}
    heads = sorted(below)
    leaves = sorted(set(range(N)) - set(heads))
    assert len(heads) == 16 and len(leaves) == N - 16
    events = [ev for _ in range(int(os.environ.get("MONARCH_CY_CHAOS_ROUNDS", "1")))
              for ev in _kill_schedule(heads, leaves, below, rng)]
    t_spawned = time.monotonic()

    kills = Kills()
    book = Book(kills)
    stop = threading.Event()
    done = []
    killed = {"head": 0, "leaf": 0}

    def killer():
        try:
            time.sleep(0.5)
            for ranks in events:
                ev = kills.start(ranks)
                for r in ranks:
                    os.kill(pids[r], signal.SIGKILL)
                    killed["head" if r in heads else "leaf"] += 1
                futs = []
                for r in ranks:                  # respawn each once its death is seen
                    end = time.monotonic() + DETECT_BOUND
                    while True:
                        try:
                            futs.append((r, pm.respawn([r])))
                            break
                        except ValueError:
                            if time.monotonic() > end:
                                raise AssertionError(f"rank {r}'s death never seen")
                            time.sleep(0.01)
                for r, fut in futs:
                    assert fut.get(RESPAWN_BOUND) == [r], r
                for r in ranks:
                    got = m.slice(gpus=r).seen.call_one().get(CALL_BOUND)
                    assert got[0] == r and got[1] != pids[r], (r, got, pids[r])
                    pids[r] = got[1]
                ev[1] = time.monotonic()
                done.append(ranks)
                time.sleep(rng.uniform(0.1, 0.6))     # calls flow in between
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            book.error("killer", type(e).__name__, repr(e)[:500])
        finally:
            stop.set()

    threads = [threading.Thread(target=killer, daemon=True),
               threading.Thread(target=_one_ops, args=(m, book, stop, random.Random(seed + 1)),
                                daemon=True)]
    for t in threads:
        t.start()
    last_b = [0]

    def mesh_ops():
        last_b[0] = _mesh_ops(m, book, stop, random.Random(seed + 2))
    mt = threading.Thread(target=mesh_ops, daemon=True)
    mt.start()
    threads.append(mt)
    end = time.monotonic() + BODY_BOUND
    for t in threads:
        t.join(max(0.1, end - time.monotonic()) + CALL_BOUND)
    alive = [t.name for t in threads if t.is_alive()]
    t_chaos = time.monotonic()
    if any(e[0] == "hung" for e in book.errors):      # where the replies stopped
        held = {h: m.slice(gpus=h).relays.call_one().get(CALL_BOUND) for h in heads}
        print(f"\nafter a hang: relays held per head {held}; pids {pids}")

    # quiet now: every rank serves, saw the last broadcast, and each incarnation's
    # broadcasts came in the order sent, none twice
    final = last_b[0] + 1
    m.mark.broadcast(final)
    seen = m.seen.call().get(CALL_BOUND).values()
    disorder = [(r, bs) for r, _, bs in seen if bs != sorted(set(bs))]
    assert [r for r, _, _ in seen] == list(range(N))
    assert [p for _, p, _ in seen] == pids
    fold = Accumulator(m.value, 0, operator.add, merge=operator.add).accumulate(1).get(
        CALL_BOUND)

    pm.stop().get(60)
    t_stop = time.monotonic()
    marks = set(os.listdir(tmp_path))
    missing = [r for r in range(N) if f"cleanup.{r}.{pids[r]}" not in marks]
    print(f"\nchaos tree: {N} procs, fan-out {K}, seed {seed}: {len(done)}/{len(events)} "
          f"kill events ({killed['head']} heads, {killed['leaf']} leaves SIGKILLed and "
          f"respawned); ok {book.ok}; failed {book.failed}; {len(faults)} reached the "
          f"fault hook; spawn {t_spawned - t_start:.1f} s, chaos "
          f"{t_chaos - t_spawned:.1f} s, stop {t_stop - t_chaos:.1f} s")
    for e in book.errors:
        print("errors:", *e)
    assert not alive, f"threads still running: {alive}"
    assert not book.errors, book.errors[:8]
    assert len(done) == len(events)
    assert killed["head"] >= 6 and killed["leaf"] >= 6
    assert not disorder, disorder[:4]
    assert all(bs and bs[-1] == final for _, _, bs in seen), \
        [(r, bs[-3:]) for r, _, bs in seen if not bs or bs[-1] != final][:6]
    assert fold == N + N * (N - 1) // 2
    assert sum(book.ok.values()) > 200, book.ok
    assert sum(book.failed.values()) > 0, "no call met a kill"
    assert not missing, f"no __cleanup__ marker for the last incarnation of {missing}"
