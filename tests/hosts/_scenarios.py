"""Controller programs for tests/hosts, each run in a fresh process.

``python tests/hosts/_scenarios.py NAME JSON_ARGS``: the controller's actor runtime
is per process and must start on TCP (reachable from the namespace hosts), so each
scenario gets its own interpreter.  A scenario prints ``RESULT <json>`` on success
and fails with a traceback (non-zero exit) otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from monarch_cy.actor import Actor, SupervisionError, endpoint  # noqa: E402


class Worker(Actor):
    def __init__(self):
        self.seen = []

    @endpoint
    def where(self):
        return {"host": socket.gethostname(), "pid": os.getpid(),
                "rank": int(os.environ["MONARCH_CY_RANK"])}

    @endpoint
    def note(self, x):
        self.seen.append(x)

    @endpoint
    def notes(self):
        return list(self.seen)

    @endpoint
    def sleep(self, s):
        time.sleep(s)
        return s

    @endpoint
    def call_peer(self, mesh):
        return mesh.where.call_one().get(30)["host"]

    @endpoint
    def make_buffer(self, n):
        import numpy as np
        from monarch_cy.rdma import RDMABuffer
        self.arr = (np.arange(n, dtype=np.uint8) * 7) % 251
        self.buf = RDMABuffer(memoryview(self.arr))
        return self.buf

    @endpoint
    def read_buffer(self, buf, n):
        import numpy as np
        dst = np.zeros(n, dtype=np.uint8)
        used = buf.backend_for()
        buf.read_into(memoryview(dst)).get(30)
        return used, int(dst.sum()), bytes(dst[:8])


def _attach(a):
    from monarch_cy._hosts.attach import attach_to_workers
    return attach_to_workers(workers=a["workers"], timeout=a.get("timeout", 10))


def mesh3(a):
    hm = _attach(a)
    assert hm.initialized.get(20) is True
    procs = hm.spawn_procs(per_host={"procs": 2})
    assert dict(procs.sizes) == {"hosts": 3, "procs": 2}, procs.sizes
    w = procs.spawn("w", Worker)
    where = w.where.call().get(30)
    hosts = [v["host"] for v in where.values()]
    assert [v["rank"] for v in where.values()] == list(range(6)), where
    assert len(set(hosts)) == 3 and hosts[0] == hosts[1] and hosts[2] == hosts[3], hosts
    w.note.broadcast("hello")
    notes = w.notes.call().get(30)
    assert all(v == ["hello"] for v in notes.values()), notes
    one = w.slice(hosts=2, procs=1).where.call_one().get(10)
    assert one["host"] == hosts[5], (one, hosts)
    peer = w.slice(hosts=0, procs=0).call_peer.call_one(w.slice(hosts=2, procs=0)).get(30)
    assert peer == hosts[4], (peer, hosts)
    procs.stop().get(15)
    return {"hosts": hosts}


def tree3(a):
    """Casts down a tree whose hops cross hosts (run with MONARCH_CY_CAST_FANOUT=2)."""
    from monarch_cy._actor.cast import router as cast_router
    from monarch_cy._actor.cast import tree as cast_tree
    hm = _attach(a)
    procs = hm.spawn_procs(per_host={"procs": 3})
    w = procs.spawn("w", Worker)
    where = w.where.call().get(30)
    assert [v["rank"] for v in where.values()] == list(range(9)), where
    assert cast_tree.fanout() == 2 and w._addrs[0] in cast_router.ROUTERS
    plan = w._plan
    assert len(plan.heads) + len(plan.direct) <= 2
    for i in range(20):                      # broadcasts, slices and call_ones, in order
        if i % 3 == 0:
            w.note.broadcast(i)
        elif i % 3 == 1:
            w.slice(hosts=1).note.broadcast(i)
        else:
            w.slice(hosts=2, procs=2).note.call_one(i)
    notes = w.notes.call().get(30).values()
    for r, got in enumerate(notes):
        want = [i for i in range(20) if i % 3 == 0 or (i % 3 == 1 and r // 3 == 1)
                or (i % 3 == 2 and r == 8)]
        assert got == want, (r, got, want)
    assert sorted(f.get(30) for f in w.sleep.stream(0.01)) == [0.01] * 9
    procs.stop().get(15)
    return {"hosts": [v["host"] for v in where.values()], "heads": len(plan.heads)}


def rdma(a):
    hm = _attach(a)
    procs = hm.spawn_procs(per_host={"procs": 1})
    w = procs.spawn("w", Worker)
    n = 3 << 20
    buf = w.slice(hosts=0).make_buffer.call_one(n).get(30)
    used, total, head = w.slice(hosts=2).read_buffer.call_one(buf, n).get(60)
    import numpy as np
    ref = (np.arange(n, dtype=np.uint8) * 7) % 251
    assert used == "tcp", used
    assert total == int(ref.sum()) and head == bytes(ref[:8]), (total, head)
    dst = np.zeros(n, dtype=np.uint8)             # the controller reads it too
    assert buf.backend_for() == "tcp"
    buf.read_into(memoryview(dst)).get(30)
    assert (dst == ref).all()
    procs.stop().get(15)
    return {"backend": used}


def cut(a):
    """Cut one host off mid-call: pending calls fail within the timeout, others work."""
    hm = _attach(a)
    procs = hm.spawn_procs(per_host={"procs": 1})
    w = procs.spawn("w", Worker)
    where = w.where.call().get(30)
    victim = a["victim"]
    pending = w.slice(hosts=victim).sleep.call_one(60)
    time.sleep(0.3)
    t0 = time.monotonic()
    if a["how"] == "link":
        subprocess.run(["ip", "link", "set", a["veth"], "down"], check=True)
    else:
        os.kill(a["agent_pid"], 9)
    try:
        pending.get(a["timeout_s"] + 10)
        raise AssertionError("the pending call on the cut host returned")
    except SupervisionError as e:
        took = time.monotonic() - t0
        err = str(e)
    try:
        w.slice(hosts=victim).where.call_one().get(5)
        raise AssertionError("a new call on the cut host did not fail")
    except SupervisionError:
        pass
    others = [h for h in range(3) if h != victim]
    for h in others:
        assert w.slice(hosts=h).where.call_one().get(10)["host"] == \
            list(where.values())[h]["host"]
    return {"took": took, "error": err,
            "victim_pid": list(where.values())[victim]["pid"]}


def controller_dies(a):
    hm = _attach(a)
    procs = hm.spawn_procs(per_host={"procs": 2})
    w = procs.spawn("w", Worker)
    pids = [v["pid"] for v in w.where.call().get(30).values()]
    print("RESULT " + json.dumps({"pids": pids}), flush=True)
    os.kill(os.getpid(), 9)


def vanish(a):
    """A host's agent dies right after the spawn request: its procs fail, others run."""
    hm = _attach(a)
    assert hm.initialized.get(20)
    procs = hm.spawn_procs(per_host={"procs": 1})
    hooked = []
    if a.get("known_before_spawn"):
        # wait until the loss is known (past the grace: the program did not see it,
        # so the fault hook is told; record it rather than end the program)
        import monarch_cy.actor
        monarch_cy.actor.unhandled_fault_hook = hooked.append
    os.kill(a["agent_pid"], 9)
    end = time.monotonic() + a["timeout_s"] + 10
    while a.get("known_before_spawn") and not hooked and time.monotonic() < end:
        time.sleep(0.05)
    t0 = time.monotonic()
    try:
        # the loss may be known before the spawn (it fails at once) or after it
        # (the call fails): either way the program is told, and the others run
        w = procs.spawn("w", Worker)
        w.slice(hosts=a["victim"]).where.call_one().get(a["timeout_s"] + 10)
        raise AssertionError("a call on the vanished host succeeded")
    except SupervisionError as e:
        err, took = str(e), time.monotonic() - t0
    for h in range(3):
        if h != a["victim"]:
            procs.slice(hosts=h).spawn("w2", Worker).where.call_one().get(15)
    return {"error": err, "took": took, "hooked": [str(f) for f in hooked]}


def bad_attach(a):
    from monarch_cy._errors import HostRefusedError, HostUnreachableError
    from monarch_cy._hosts.attach import attach_to_workers
    t0 = time.monotonic()
    hm = attach_to_workers(workers=a["workers"], timeout=a["timeout"])
    try:
        hm.spawn_procs(per_host={"procs": 1})
        raise AssertionError("spawn on a bad host succeeded")
    except (HostRefusedError, HostUnreachableError) as e:
        return {"type": type(e).__name__, "error": str(e),
                "took": time.monotonic() - t0}


def slurm(a):
    from monarch_cy.job import SlurmJob
    job = SlurmJob(meshes={"trainers": 2, "extra": 1}, log_dir=a["log_dir"],
                   job_start_timeout=60)
    t0 = time.monotonic()
    job.apply()
    st = job.state()
    t_state = time.monotonic() - t0
    procs = st.trainers.spawn_procs(per_host={"procs": 2})
    w = procs.spawn("w", Worker)
    hosts = [v["host"] for v in w.where.call().get(30).values()]
    extra = st.extra.spawn_procs().spawn("w", Worker).where.call_one().get(30)["host"]
    out = {"job": job.job_id, "hosts": hosts, "extra": extra, "t_state": t_state}
    if a.get("die"):
        print("RESULT " + json.dumps(out), flush=True)
        os.kill(os.getpid(), 9)
    job.kill()
    return out


def slurm_rejected(a):
    from monarch_cy._errors import SchedulerError
    from monarch_cy.job import SlurmJob
    job = SlurmJob(meshes={"m": a["nodes"]}, partition=a.get("partition"),
                   log_dir=a["log_dir"], job_start_timeout=20)
    try:
        job.apply()
        job.state()
        raise AssertionError("the job was accepted")
    except SchedulerError as e:
        return {"error": str(e)}


if __name__ == "__main__":
    name, args = sys.argv[1], json.loads(sys.argv[2])
    result = globals()[name](args)
    print("RESULT " + json.dumps(result), flush=True)
