"""SLURM controller programs for tests/hosts/test_slurm.py, each in a fresh process.

``python tests/hosts/_slurm_scenarios.py NAME JSON_ARGS`` prints ``RESULT <json>``
on success and fails with a traceback otherwise (as ``_scenarios.py``).  Run under
``salloc`` or from an ``sbatch`` script, ``inside`` is a controller inside an
allocation.
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

from monarch_cy.actor import Actor, endpoint  # noqa: E402


class Where(Actor):
    @endpoint
    def where(self):
        return {"host": socket.gethostname(), "pid": os.getpid()}


def _hosts(mesh, per_host=1):
    procs = mesh.spawn_procs(per_host={"procs": per_host})
    w = procs.spawn("w", Where)
    return [v["host"] for v in w.where.call().get(30).values()], procs


def _job(a, **kw):
    from monarch_cy.job import SlurmJob
    return SlurmJob(meshes=a.get("meshes", {"m": 2}), log_dir=a["log_dir"],
                    job_start_timeout=a.get("timeout", 60), **kw, **a.get("kw", {}))


def _scontrol(job_id):
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                         text=True).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def params(a):
    """Monarch's parameters reach SLURM: the job's own record shows them."""
    job = _job(a)
    st = job.state()
    rec = _scontrol(job.job_id)
    hosts, _ = _hosts(st.m, 2)
    job.kill()
    return {"job": job.job_id, "hosts": hosts, "scontrol": rec}


def cached(a):
    """One controller of a cached job: attach (or submit), run procs, then end as told."""
    from monarch_cy.job import SlurmJob
    job = SlurmJob(meshes=a["meshes"], log_dir=a["log_dir"], job_start_timeout=60)
    t0 = time.monotonic()
    st = job.state(cached_path=a["cache"])
    took = time.monotonic() - t0
    hosts, procs = _hosts(st.m)
    out = {"job": job.job_id, "hosts": hosts, "took": took,
           "mode": oct(os.stat(a["cache"]).st_mode & 0o777)}
    if a["end"] == "die":
        print("RESULT " + json.dumps(out), flush=True)
        os.kill(os.getpid(), 9)
    if a["end"] == "kill":
        job.kill()
    return out


def bad(a):
    """A job that cannot run: the error, its type, and how long it took."""
    t0 = time.monotonic()
    try:
        job = _job(a)
        job.state()
    except Exception as e:
        return {"type": type(e).__name__, "error": str(e), "took": time.monotonic() - t0,
                "job": getattr(locals().get("job"), "job_id", None)}
    raise AssertionError("the job was accepted")


def inside(a):
    """A controller inside an allocation (salloc, or an sbatch batch script)."""
    job = _job(a)
    st = job.state()
    hosts, _ = _hosts(st.m)
    return {"job": job.job_id, "env_job": os.environ.get("SLURM_JOB_ID"),
            "me": socket.gethostname(), "hosts": hosts, "step": job._srun is not None}


if __name__ == "__main__":
    name, args = sys.argv[1], json.loads(sys.argv[2])
    result = globals()[name](args)
    print("RESULT " + json.dumps(result), flush=True)
