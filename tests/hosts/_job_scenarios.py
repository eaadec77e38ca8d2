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
        again = job.state(cached_path=None)        # each state() attaches anew
        assert again is not st and again.trainers.sizes == st.trainers.sizes
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



# -- sharing hosts and procs; workers started as Monarch's tests start them ----------

class Place(Actor):
    @endpoint
    def host(self):
        from monarch_cy.actor import this_host
        return this_host()

    @endpoint
    def pid(self):
        return os.getpid()

    @endpoint
    def spawn_beside(self):
        """A proc started from this_host() here: on this proc's own host."""
        from monarch_cy.actor import this_host
        pm = this_host().spawn_procs(per_host={"procs": 1})
        return pm.spawn("inner", Place).ppid_and_wrapper.call_one().get(30)

    @endpoint
    def ppid_and_wrapper(self):
        return [os.getppid(), os.environ.get("WRAPPED_BY", "")]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def after_local_procs(a):
    """A ProcessJob once local procs run (the runtime is then on unix://)."""
    from monarch_cy.actor import this_host
    from monarch_cy.job import ProcessJob
    local = this_host().spawn_procs(per_host={"procs": 1}).spawn("l", Place)
    lpid = local.pid.call_one().get(30)
    job = ProcessJob({"hosts": 2})
    st = job.state(cached_path=None)
    remote = st.hosts.spawn_procs(per_host={"procs": 1}).spawn("r", Place)
    rpids = sorted(remote.pid.call().get(30).values())
    st.hosts.shutdown().get(30)
    job.kill()
    return {"local": lpid != os.getpid(), "remote": len(set(rpids)) == 2}


def stop_own_only(a):
    """Two host meshes over the same workers (two state() calls): stopping one
    stops its procs only; shutting the other down ends the workers."""
    from monarch_cy.job import ProcessJob
    job = ProcessJob({"hosts": 2})
    hm1 = job.state(cached_path=None).hosts
    hm2 = job.state(cached_path=None).hosts
    p1 = list(hm1.spawn_procs(per_host={"procs": 1}).spawn("a", Place).pid.call().get(30)
              .values())
    p2 = list(hm2.spawn_procs(per_host={"procs": 1}).spawn("b", Place).pid.call().get(30)
              .values())
    hm1.stop().get(30)
    gone1 = [p for p in p1 if _alive(p)]
    alive2 = [p for p in p2 if _alive(p)]
    agents = [w["pid"] for w in job._workers]
    hm2.shutdown().get(30)
    return {"left1": gone1, "alive2": alive2, "agents": agents, "p2": p2}


def host_refs(a):
    """this_host() in a proc names its host; a host mesh unpickled in the controller
    is a reference to the same hosts; spawn_procs from an actor on a remote host."""
    import cloudpickle
    from monarch_cy.job import ProcessJob
    job = ProcessJob({"hosts": 3})
    hm = job.state(cached_path=None).hosts
    pm = hm.spawn_procs(per_host={"gpus": 2})
    got = list(pm.spawn("p", Place).host.call().get(30).values())
    want = [hm.slice(hosts=i) for i in range(3) for _ in range(2)]
    sliced = list(hm.slice(hosts=slice(1, 3)).spawn_procs().spawn("q", Place).host.call()
                  .get(30).values())
    ref = cloudpickle.loads(cloudpickle.dumps(hm))
    try:
        ref.shutdown()
        refused = None
    except RuntimeError as e:
        refused = str(e)
    outer = pm.spawn("o", Place).slice(hosts=1, gpus=0)
    outer_ppid = outer.ppid_and_wrapper.call_one().get(30)[0]
    inner_ppid = outer.spawn_beside.call_one().get(60)[0]
    region = hm.slice(hosts=2)._hy_host_mesh.block_on().region
    out = {"this_host": got == want, "sliced": sliced == want[2::2],
           "ref_equal": ref == hm, "refused": refused,
           "same_host_spawn": inner_ppid == outer_ppid,
           "region": [region.labels, region.slice().offset, len(region.slice())],
           "fake": hm.is_fake_in_process, "stream_logs": hm.stream_logs,
           "inner_none": hm._inner_host_mesh is None}
    hm.shutdown().get(30)
    out["inner_none_after"] = hm._inner_host_mesh is None
    job.kill()
    return out


def _start_worker(address, home, pass_fds=()):
    import subprocess
    env = dict(os.environ, HOME=home)
    return subprocess.Popen(
        [sys.executable, "-c", "from monarch_cy.actor import run_worker_loop_forever; "
         f"run_worker_loop_forever(address={address!r}, ca='trust_all_connections')"],
        env=env, pass_fds=pass_fds)


def workers_without_secret(a):
    """Worker loops started with nothing but an address (ipc://, an inherited fd, an
    alias), attached without a secret; shutdown() ends them.  A worker of another
    user's secret is refused."""
    import socket
    import tempfile
    from monarch_cy.actor import attach_to_workers
    home = os.environ["HOME"]
    d = tempfile.mkdtemp(prefix="mcy-w-")
    procs, workers = [], []
    try:
        procs.append(_start_worker(f"ipc://{d}/w0", home))
        workers.append(f"ipc://{d}/w0")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        procs.append(_start_worker(f"tcp://127.0.0.1:fd{s.fileno()}", home, (s.fileno(),)))
        s.close()
        workers.append(f"tcp://127.0.0.1:{port}")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        procs.append(_start_worker(f"tcp://127.0.0.1:{port}@tcp://0.0.0.0:{port}", home))
        workers.append(f"tcp://127.0.0.1:{port}@tcp://0.0.0.0:{port}")
        hm = attach_to_workers(workers=workers, ca="trust_all_connections")
        pm = hm.spawn_procs(per_host={"procs": 2})
        n = len(pm.spawn("w", Place).pid.call().get(30))
        hm.shutdown().get(30)
        codes = [p.wait(30) for p in procs]
        # a worker holding another user's secret fails the handshake
        other = tempfile.mkdtemp(prefix="mcy-home-")
        stranger = _start_worker(f"ipc://{d}/w9", other)
        procs.append(stranger)
        try:
            attach_to_workers(workers=[f"ipc://{d}/w9"], timeout=5).initialized.get(30)
            refused = None
        except Exception as e:
            refused = f"{type(e).__name__}: {e}"
        return {"procs": n, "codes": codes, "refused": refused}
    finally:
        for p in procs:
            p.kill()


def login_job(a):
    """A LoginJob of the program's own: hosts started by _start_host at ipc://."""
    import subprocess
    import tempfile
    from monarch_cy._hosts.job import ProcessState
    from monarch_cy._hosts.login_job import LoginJob
    d = tempfile.mkdtemp(prefix="mcy-login-")

    class Local(LoginJob):
        def _start_host(self, host):
            addr = f"ipc://{d}/{host}"
            p = subprocess.Popen([sys.executable, "-c", "from monarch_cy.actor import "
                                  f"run_worker_loop_forever; run_worker_loop_forever("
                                  f"address={addr!r}, ca='trust_all_connections')"],
                                 start_new_session=True)
            return ProcessState(p.pid, addr)
    job = Local()
    job.add_mesh("hosts", ["a", "b"])
    st = job.state(cached_path=None)
    pids = list(st.hosts.spawn_procs().spawn("w", Place).pid.call().get(30).values())
    workers = [p.pid for p in job._host_to_pid.values()]
    job.kill()
    return {"procs": len(pids), "workers": workers, "active": job.active}


def attach_contract(a):
    from monarch_cy.actor import attach, this_proc
    attach(a["addr"])
    attach(a["addr"])                          # the same again: a no-op
    out = {}
    try:
        attach(a["addr"] + "x")
    except RuntimeError as e:
        out["other"] = str(e)
    this_proc()                                # the runtime starts
    return out


def attach_then_remove(a):
    """attach(addr) before the runtime starts: attach_to_workers([addr]) returns with the
    link up, so the worker's socket file may go at once (Monarch's duplex bootstrap)."""
    import tempfile
    import time
    from monarch_cy.actor import attach, attach_to_workers
    d = tempfile.mkdtemp(prefix="mcy-gw-")
    path = os.path.join(d, "w")
    worker = _start_worker(f"ipc://{path}", os.environ["HOME"])
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        attach(f"ipc://{path}")
        hm = attach_to_workers(workers=[f"ipc://{path}"], ca="trust_all_connections")
        os.remove(path)
        n = len(hm.spawn_procs(per_host={"procs": 2}).spawn("w", Place).pid.call().get(30))
        hm.shutdown().get(30)
        return {"procs": n, "code": worker.wait(30)}
    finally:
        worker.kill()


def attach_after_start(a):
    from monarch_cy.actor import attach, this_proc
    this_proc()
    try:
        attach(a["addr"])
    except RuntimeError as e:
        return {"late": str(e)}
    return {"late": None}


def python_executable(a):
    """with_python_executable: procs start through the wrapper, and so do procs they
    start from this_host()."""
    from monarch_cy.actor import this_host
    hm = this_host().with_python_executable(a["wrapper"])
    outer = hm.spawn_procs(per_host={"procs": 1}).spawn("o", Place)
    first = outer.ppid_and_wrapper.call_one().get(60)[1]
    inner = outer.spawn_beside.call_one().get(60)[1]
    plain = this_host().spawn_procs().spawn("p", Place).ppid_and_wrapper.call_one().get(60)[1]
    return {"outer": first, "inner": inner, "plain": plain,
            "equal": hm == this_host(), "again": hm == this_host().with_python_executable(
                a["wrapper"])}


def kill_is_not_a_failure(a):
    """job.kill() with procs running: they end on purpose; the hook hears nothing."""
    import time
    import monarch_cy.actor as api
    from monarch_cy.job import ProcessJob
    hooked = []
    api.unhandled_fault_hook = hooked.append
    job = ProcessJob({"hosts": 2})
    pm = job.state(cached_path=None).hosts.spawn_procs(per_host={"procs": 1})
    pids = list(pm.spawn("w", Place).pid.call().get(30).values())
    job.kill()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    time.sleep(1.0)                # a failure would reach the hook by now
    return {"hooked": [str(f) for f in hooked], "left": [p for p in pids if _alive(p)]}


if __name__ == "__main__":
    name, args = sys.argv[1], json.loads(sys.argv[2])
    res = globals()[name](args)
    print("RESULT " + json.dumps(res), flush=True)
