"""Controller programs for the job and worker-loop tests, one per process.

``python tests/hosts/_job_scenarios.py NAME JSON_ARGS`` (the controller's actor
runtime is per process).  Prints ``RESULT <json>`` on success; fails with a
traceback otherwise.  Traffic stays on loopback.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from monarch_cy.actor import Actor, endpoint  # noqa: E402


class Worker(Actor):
    @endpoint
    def where(self):
        return {"pid": os.getpid(), "ppid": os.getppid(),
                "flag": os.environ.get("PJ_FLAG")}


def _use(hm, per_host=1):
    pm = hm.spawn_procs(per_host={"gpus": per_host})
    out = [v for _, v in pm.spawn("w", Worker).where.call().get()]
    pm.stop().get()
    return out


def process_job(a):
    """A ProcessJob owned by this controller: meshes, procs, kill."""
    from monarch_cy.job import JobState, ProcessJob
    job = ProcessJob({"trainers": 2, "dataloaders": 1}, env={"PJ_FLAG": "yes"})
    with job:
        st = job.state(cached_path=None)
        assert isinstance(st, JobState)
        t, d = _use(st.trainers, 2), _use(st.dataloaders)
        agents = [w["pid"] for w in job._workers]
        assert job.state(cached_path=None) is st
        active = job.active
    return {"trainers": t, "dataloaders": d, "agents": agents, "active": active,
            "after": job.active, "sizes": [st.trainers.sizes, st.dataloaders.sizes],
            "missing": _missing(st)}


class RemoteWriter(Actor):
    @endpoint
    def write(self, tag):
        import subprocess
        print(f"py-{tag}", flush=True)
        os.write(1, f"fd-out-{tag}\n".encode())
        os.write(2, f"fd-err-{tag}\n".encode())
        subprocess.run(["sh", "-c", f"echo child-{tag}"], check=True)

    @endpoint
    def last_words(self, text):
        import signal
        os.write(1, f"{text}\n".encode())
        os.write(2, b"no newline at the end")
        os.kill(os.getpid(), signal.SIGKILL)


def remote_output(a):
    """Procs on a host agent: what they write to fds 1 and 2 (Python, raw fds, a
    child process) reaches this controller with their rank, a killed proc's last
    lines come with its failure, and the controller keeps each proc's log file."""
    import glob
    import time
    import monarch_cy.actor as api
    from monarch_cy._actor.base.state import get_node
    from monarch_cy.actor import SupervisionError
    from monarch_cy.job import ProcessJob
    hooked = []
    api.unhandled_fault_hook = hooked.append
    api.fault_hook_skips_seen = False        # Monarch's rule: the hook hears of it too
    with ProcessJob({"hosts": 1}) as job:
        pm = job.state(cached_path=None).hosts.spawn_procs(per_host={"gpus": 2},
                                                            name="remote")
        w = pm.spawn("rw", RemoteWriter)
        w.write.call("x").get(30)
        try:
            w.slice(gpus=1).last_words.call_one("famous last words").get(30)
            failure = None
        except SupervisionError as e:
            failure = str(e)
        deadline = time.monotonic() + 5
        while not hooked and time.monotonic() < deadline:
            time.sleep(0.05)
        logs = {}
        for path in glob.glob(os.path.join(get_node().rundir, "logs", "remote-*.log")):
            with open(path) as f:
                logs[os.path.basename(path).rsplit(".", 2)[-2]] = f.read()
        pm.stop().get(30)
    return {"failure": failure, "hook": [f.report() for f in hooked], "logs": logs}


class Sleeper(Actor):
    @endpoint
    def nap_in_c(self, seconds):
        import time
        time.sleep(seconds)


def remote_stacks(a):
    """dump_stacks() of procs on a host agent: the agent reads them with py-spy."""
    from monarch_cy.job import ProcessJob
    with ProcessJob({"hosts": 1}) as job:
        pm = job.state(cached_path=None).hosts.spawn_procs(per_host={"gpus": 2},
                                                            name="napping")
        m = pm.spawn("s", Sleeper)
        pids = [p for _, p in pm.spawn("w", Worker).where.call().get(30)]
        calls = [m.nap_in_c.call(30)]
        import time
        deadline = time.monotonic() + 20
        while True:
            stacks = pm.dump_stacks().get(60).values()
            if all("Sleeper.nap_in_c" in s.functions() for s in stacks) or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.2)
        out = [{"rank": s.rank, "pid": s.pid, "error": s.error, "label": s.label,
                "napping": "Sleeper.nap_in_c" in s.functions()} for s in stacks]
        running = not any(c.done() for c in calls)
        pm.stop().get(30)
    return {"stacks": out, "pids": [p["pid"] for p in pids], "running": running}


def _missing(st):
    try:
        st.nope
    except AttributeError as e:
        return str(e)


def owned_exit(a):
    """A ProcessJob left running at exit: the agents end with this controller."""
    from monarch_cy.job import ProcessJob
    job = ProcessJob({"hosts": 2})
    st = job.state(cached_path=None)
    procs = _use(st.hosts)
    if a.get("crash"):
        print("RESULT " + json.dumps({"agents": [w["pid"] for w in job._workers],
                                      "procs": procs}), flush=True)
        os._exit(3)
    return {"agents": [w["pid"] for w in job._workers], "procs": procs}


def cached_first(a):
    """state(cached_path=...) in a first controller: applies and caches the job."""
    from monarch_cy.job import ProcessJob
    job = ProcessJob({"hosts": 2})
    st = job.state(cached_path=a["path"])
    return {"procs": _use(st.hosts), "agents": [w["pid"] for w in job._workers],
            "mode": oct(os.stat(a["path"]).st_mode & 0o777)}


def cached_again(a):
    """A later controller: re-attach (same spec), or replace (another spec); kill."""
    from monarch_cy.job import ProcessJob, job_load
    job = ProcessJob(a.get("meshes", {"hosts": 2}))
    st = job.state(cached_path=a["path"])
    name = next(iter(a.get("meshes", {"hosts": 2})))
    procs = _use(getattr(st, name))
    running = job._running
    agents = [w["pid"] for w in running._workers]
    loaded = job_load(a["path"]) if os.path.exists(a["path"]) else None
    if a.get("kill"):
        job.kill()
    return {"procs": procs, "agents": agents, "active": job.active,
            "loaded": loaded is not None and loaded.can_run(job)}


def kill_loaded(a):
    """job_load(path).kill() from a controller that never attached."""
    from monarch_cy.job import job_load
    job = job_load(a["path"])
    agents = [w["pid"] for w in job._workers]
    job.kill()
    return {"agents": agents, "active": job.active}


def attach_workers(a):
    """attach_to_workers over worker loops started elsewhere."""
    from monarch_cy.actor import attach_to_workers
    hm = attach_to_workers(workers=a["workers"], ca="trust_all_connections")
    assert hm.initialized.get() is True
    return {"procs": _use(hm, a.get("per_host", 1))}


def hosts_from_config(a):
    from monarch_cy.job import hosts_from_config
    hm = hosts_from_config("trainers")
    from monarch_cy._hosts.local_jobs import _config_jobs
    return {"sizes": hm.sizes, "procs": _use(hm),
            "agents": [w["pid"] for w in _config_jobs[0]._workers]}


def local_job(a):
    from monarch_cy.job import LocalJob
    job = LocalJob(hosts=("trainers", "evals"))
    st = job.state(cached_path=a.get("path"))
    return {"procs": _use(st.trainers), "same": st.trainers is not None,
            "cached": bool(a.get("path")) and os.path.exists(a["path"])}


def batch_client(a):
    """apply(client_script=...): the script loads the batch job and uses this host."""
    import time
    from monarch_cy.job import LocalJob
    job = LocalJob()
    job.apply(client_script=a["script"])
    code = job.process.wait(120)
    return {"code": code, "out": open(a["out"]).read() if os.path.exists(a["out"]) else ""}


def store_job(a):
    """StoreJob.from_store on a one-rank job (a dict as the store)."""
    class Store(dict):
        def set(self, k, v):
            self[k] = v

        def get(self, k):
            return self[k]
    from monarch_cy.job.spmd import StoreJob
    store = Store()
    job = StoreJob.from_store(store, rank=0, local_rank=0, world_size=1,
                              local_world_size=1, name="w")
    st = job.state()
    return {"procs": _use(st.w), "keys": sorted(store)}


def spmd_serve(a):
    """serve(torchrun command, scheduler='local_cwd').run_spmd()."""
    from monarch_cy.job.spmd import serve
    job = serve(["torchrun", "--nproc-per-node=2", "--standalone", a["script"], "x"],
                scheduler="local_cwd")
    job.run_spmd()
    return {"workers": job.state(cached_path=None).workers is not None}


if __name__ == "__main__":
    name, args = sys.argv[1], json.loads(sys.argv[2])
    res = globals()[name](args)
    print("RESULT " + json.dumps(res), flush=True)
