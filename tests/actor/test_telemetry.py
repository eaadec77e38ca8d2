"""Telemetry (docs/observability.md): Monarch's get_meter/span/traced, the runtime's
spans and metrics read back from the in-process reader, and nothing at all while off.

Each case runs in its own interpreter: telemetry, once on, stays on in a process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code: str, env: dict | None = None) -> dict:
    full = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    full.pop("MONARCH_CY_TELEMETRY", None)
    full.update(env or {})
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=full, timeout=150, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


ACTORS = """
    import json, os, sys
    from monarch_cy.actor import Actor, endpoint, get_meter, span, this_host, traced
    from monarch_cy import telemetry

    @traced
    def helper(x):
        return x + 1

    class Worker(Actor):
        def __init__(self):
            self.hits = get_meter().create_counter("user.hits")

        @endpoint
        def work(self, x):
            self.hits.add(1, {"kind": "work"})
            with span("user.block") as s:
                s.set_attribute("x", x)
                return helper(x)

        @endpoint
        def boom(self):
            raise ValueError("boom")

        @endpoint
        def die(self):
            os._exit(3)

        @endpoint
        def spans(self):
            return [(s.name, dict(s.attributes), s.parent.span_id if s.parent else None,
                     s.context.span_id, s.status.status_code.name)
                    for s in telemetry.finished_spans()]

        @endpoint
        def metrics(self):
            return _points()

    class AsyncWorker(Actor):
        @endpoint
        async def awork(self, x):
            return await self._slow(x)

        @traced(name="user.slow")
        async def _slow(self, x):
            return x * 2

        @endpoint
        async def spans(self):
            return Worker.spans._fn(self)

    def _points():
        out = {}
        for name, pts in telemetry.metrics().items():
            out[name] = [(dict(p.attributes), getattr(p, "count", None)
                          if hasattr(p, "bucket_counts") else p.value) for p in pts]
        return out
"""


def _total(points, **want) -> float:
    return sum(v for attrs, v in points if all(attrs.get(k) == x for k, x in want.items()))


def test_100_calls_read_back_with_rank_mesh_endpoint_failures_and_a_respawn():
    got = _run(ACTORS + """
    import time
    telemetry.enable_telemetry()
    assert os.environ["MONARCH_CY_TELEMETRY"] == "1"
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("tm", Worker)
    for i in range(100):
        assert m.slice(gpus=i % 2).work.call_one(i).get(10) == i + 1
    a = pm.spawn("ta", AsyncWorker)
    assert a.awork.call(3).get(10).values() == [6, 6]
    try:
        m.slice(gpus=1).boom.call_one().get(10)
    except Exception as e:
        assert type(e).__name__ == "ActorError"
    worker_spans = a.slice(gpus=1).spans.call_one().get(10)   # the proc's spans: both actors
    worker_metrics = m.slice(gpus=1).metrics.call_one().get(10)
    m.slice(gpus=1).die.broadcast()
    end = time.monotonic() + 20
    while not pm.respawn().get(30):
        assert time.monotonic() < end
        time.sleep(0.05)
    assert m.slice(gpus=1).work.call_one(1).get(10) == 2
    ctl_spans = [(s.name, dict(s.attributes), s.kind.name, s.status.status_code.name)
                 for s in telemetry.finished_spans()]
    print(json.dumps({"ctl": _points(), "ctl_spans": ctl_spans, "w_spans": worker_spans,
                      "w": worker_metrics}))
    pm.stop().get(10)
    """)
    ctl, w = got["ctl"], got["w"]
    # the controller: 100 calls by endpoint, rank and mesh; a failure; latency of each
    calls = ctl["monarch.call.count"]
    assert _total(calls, **{"monarch.mesh": "tm", "monarch.endpoint": "work"}) == 101
    assert _total(calls, **{"monarch.endpoint": "work", "monarch.rank": 0}) == 50
    assert _total(calls, **{"monarch.endpoint": "work", "monarch.rank": 1}) == 51
    assert _total(calls, **{"monarch.endpoint": "awork"}) == 1
    assert _total(ctl["monarch.call.latency"], **{"monarch.endpoint": "work"}) == 101
    assert _total(ctl["monarch.call.failures"], **{"monarch.endpoint": "boom",
                                                    "monarch.rank": 1}) == 1
    assert _total(ctl["monarch.call.failures"], **{"monarch.endpoint": "work"}) == 0
    # the respawn: counted with its mesh and rank, and a span
    assert _total(ctl["monarch.proc.respawns"], **{"monarch.rank": 1}) == 1
    spans = got["ctl_spans"]
    work = [s for s in spans if s[0] == "tm.work"]
    assert len(work) == 101 and all(s[2] == "CLIENT" for s in work)
    assert {s[1]["monarch.rank"] for s in work} == {0, 1}
    assert [s[3] for s in spans if s[0] == "tm.boom"] == ["ERROR"]
    assert any(s[0].startswith("respawn") and s[1]["monarch.rank"] == 1 for s in spans)
    # the actor of rank 1: its runs, failures and bytes, by endpoint
    assert _total(w["monarch.endpoint.count"], **{"monarch.endpoint": "work",
                                                   "monarch.rank": 1,
                                                   "monarch.mesh": "tm"}) == 50
    assert _total(w["monarch.endpoint.failures"], **{"monarch.endpoint": "boom"}) == 1
    assert _total(w["monarch.endpoint.latency"], **{"monarch.endpoint": "awork",
                                                     "monarch.mesh": "ta"}) == 1
    assert _total(w["monarch.endpoint.bytes"], **{"monarch.endpoint": "work"}) > 50 * 50
    assert _total(w["user.hits"]) == 50                       # get_meter() in user code
    # spans in the actor: the endpoint's (SERVER) and the user's nested under it
    by_id = {s[3]: s for s in got["w_spans"]}
    blocks = [s for s in got["w_spans"] if s[0] == "user.block"]
    assert len(blocks) == 50
    parent = by_id[blocks[0][2]]
    assert parent[0] == "tm.work" and parent[1]["monarch.rank"] == 1
    assert blocks[0][1]["monarch.mesh"] == "tm" and blocks[0][1]["x"] % 2 == 1
    helpers = [s for s in got["w_spans"] if s[0] == "helper"]     # @traced
    assert len(helpers) == 50 and by_id[helpers[0][2]][0] == "user.block"
    slow = [s for s in got["w_spans"] if s[0] == "user.slow"]     # @traced(name=) async
    assert len(slow) == 1 and by_id[slow[0][2]][0] == "ta.awork"
    assert [s[4] for s in got["w_spans"] if s[0] == "tm.boom"] == ["ERROR"]


def test_trace_context_travels_with_the_call():
    """A call is one trace: the endpoint's SERVER span in the actor is a child of the
    caller's CLIENT span (call_one, call, an async endpoint, accumulate); the
    context never reaches the endpoint's arguments, also in a proc that started
    before telemetry was on (it records nothing, and its endpoint sees no extra
    keyword)."""
    got = _run(ACTORS + """
    from monarch_cy.actor import Accumulator

    class Kw(Actor):
        @endpoint
        def kw(self, *a, **kw):
            return [list(a), sorted(kw)]

        @endpoint
        def traces(self):
            return [(s.name, s.context.trace_id, s.context.span_id,
                     s.parent.span_id if s.parent else None, s.parent is not None and
                     s.parent.is_remote) for s in telemetry.finished_spans()]

    early = this_host().spawn_procs(per_host={"gpus": 1}).spawn("early", Kw)
    telemetry.enable_telemetry()
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    k = pm.spawn("tk", Kw)
    a = pm.spawn("ta", AsyncWorker)
    out = {"one": k.slice(gpus=0).kw.call_one(1, x=2).get(10),
           "all": k.kw.call(3).get(10).values(),
           "early": early.kw.call_one(4, y=5).get(10),
           "async": a.awork.call(3).get(10).values(),
           "acc": Accumulator(k.kw, 0, lambda acc, v: acc + len(v[1])).accumulate(
               6).get(10)}
    out["ctl"] = [(s.name, s.context.trace_id, s.context.span_id)
                  for s in telemetry.finished_spans()]
    out["w0"] = k.slice(gpus=0).traces.call_one().get(10)
    out["w1"] = a.slice(gpus=1).spans.call_one().get(10)
    out["early_spans"] = early.traces.call_one().get(10)
    print(json.dumps(out))
    pm.stop().get(10)
    """)
    assert got["one"] == [[1], ["x"]] and got["early"] == [[4], ["y"]], got
    assert got["all"] == [[[3], []], [[3], []]] and got["async"] == [6, 6], got
    assert got["acc"] == 0, got            # no keyword reached either actor
    ctl = {}
    for name, trace_id, span_id in got["ctl"]:
        ctl.setdefault(name, []).append((trace_id, span_id))
    servers = [s for s in got["w0"] if s[0] == "tk.kw"]
    assert len(servers) == 3, got["w0"]          # call_one, call, accumulate on rank 0
    clients = {(t, sid) for t, sid in ctl["tk.kw"]}
    for _name, trace_id, _sid, parent, remote in servers:
        assert (trace_id, parent) in clients and remote, (servers, clients)
    assert len({s[1] for s in servers}) == 3      # three calls, three traces
    (client,) = ctl["ta.awork"]
    awork = [s for s in got["w1"] if s[0] == "ta.awork"]
    assert len(awork) == 1 and awork[0][2] == client[1], (awork, client)
    assert got["early_spans"] == []               # telemetry off there: nothing recorded


def test_monarch_signatures_and_no_op_when_off():
    got = _run("""
    import inspect, json, sys
    from monarch_cy.actor import get_meter, span, traced
    from monarch_cy.job import TelemetryConfig, ProcessJob
    import monarch_cy.telemetry as t
    @traced
    def f(x): return x
    @traced(name="named")
    async def g(): return 1
    with span("off") as s:
        pass
    meter = get_meter()
    meter.create_counter("c").add(1)
    meter.create_histogram("h").record(1.0)
    import asyncio
    out = {"f": f(3), "name": f.__name__, "g": asyncio.run(g()), "on": t.is_enabled(),
           "spans": len(t.finished_spans()), "metrics": t.metrics(),
           "span_sig": str(inspect.signature(span)),
           "cfg": [TelemetryConfig().retention_secs, TelemetryConfig(7).retention_secs],
           "job": str(inspect.signature(ProcessJob.enable_telemetry))}
    print(json.dumps(out))
    """)
    assert got["f"] == 3 and got["name"] == "f" and got["g"] == 1
    assert got["on"] is False and got["spans"] == 0 and got["metrics"] == {}
    assert got["span_sig"] == "(name: 'str')"
    assert got["cfg"] == [3600, 7]
    assert got["job"].startswith("(self, config=None, *, mesh_admin_config=None")


def test_job_enable_telemetry_on_state_and_monarch_paths():
    got = _run("""
    import json
    import monarch_cy.compat as compat
    compat.install()
    from monarch.job import ProcessJob, TelemetryConfig
    from monarch.actor import Actor, endpoint, get_meter, span, traced
    from monarch._src.actor.telemetry import get_meter as g2
    import monarch_cy.telemetry as t
    job = ProcessJob({"hosts": 1})
    assert job.enable_telemetry(TelemetryConfig()) is job
    assert not t.is_enabled()
    job.state(cached_path=None)
    print(json.dumps({"on": t.is_enabled(), "same": g2 is get_meter}))
    job.kill()
    """)
    assert got == {"on": True, "same": True}


def test_telemetry_off_imports_no_opentelemetry_and_leaves_the_call_path_alone():
    got = _run("""
    import json, sys
    import monarch_cy.actor as A
    import monarch_cy.telemetry
    from monarch_cy._actor.model.endpoint import Endpoint
    plain = Endpoint.call_one
    class E(A.Actor):
        @A.endpoint
        def hi(self, x):
            return x, sorted(m for m in sys.modules if m.startswith("opentelemetry"))
    pm = A.this_host().spawn_procs(per_host={"gpus": 1})
    _, worker = pm.spawn("e", E).hi.call_one(1).get(10)
    print(json.dumps({"ctl": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
                      "worker": worker, "plain": Endpoint.call_one is plain}))
    pm.stop().get(10)
    """)
    assert got == {"ctl": [], "worker": [], "plain": True}


def test_env_switch_and_otlp_without_exporter_warns_and_keeps_in_memory():
    got = _run("""
    import json, warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        import monarch_cy.actor as A
        import monarch_cy.telemetry as t
        class E(A.Actor):
            @A.endpoint
            def hi(self):
                return t.is_enabled(), len(t.finished_spans())
        pm = A.this_host().spawn_procs(per_host={"gpus": 1})
        on_worker, nspans = pm.spawn("e", E).hi.call_one().get(10)
        out = {"on": t.is_enabled(), "worker": on_worker,
               "warned": [str(x.message) for x in w if "OTLP" in str(x.message)],
               "ctl_spans": [s.name for s in t.finished_spans()]}
    print(json.dumps(out))
    pm.stop().get(10)
    """, env={"MONARCH_CY_TELEMETRY": "1",
              "MONARCH_CY_TELEMETRY_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert got["on"] is True and got["worker"] is True
    assert got["ctl_spans"] == ["e.hi"]
    assert len(got["warned"]) == 1 and "opentelemetry-exporter-otlp" in got["warned"][0]
