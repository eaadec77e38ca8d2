"""A job type of the program's own (a scheduler Monarch lets programs add): apply,
dump, state from the cache, job_load, dumps/job_loads; JobState's service attributes
without telemetry or admin."""

import os
import tempfile

from _obs import obs, step  # noqa: E402
from monarch._src.job.job import JobState, JobTrait, job_load, job_loads  # noqa: E402


class Marker:
    def __init__(self, name):
        self.name = name


class MyJob(JobTrait):
    def __init__(self, hosts=("default",), runs_any=True):
        super().__init__()
        self.hosts = tuple(hosts)
        self.runs_any = runs_any
        self.created = False

    def _create(self, client_script):
        self.created = True

    def _state(self):
        return JobState({h: Marker(h) for h in self.hosts})

    def can_run(self, spec):
        return self.runs_any

    def _kill(self):
        pass


d = tempfile.mkdtemp(prefix="diff-")
path = os.path.join(d, "job.pkl")
first = MyJob(("trainers", "evals"))
first.apply()
first.dump(path)
spec = MyJob()
st = spec.state(cached_path=path)
obs("from_cache", {"created": spec.created, "trainers": st.trainers.name,
                   "active": spec.active, "same_apply_id": spec.apply_id == first.apply_id})
obs("services", [st.query_engine, st.telemetry_url, st.admin_url])
step("missing_mesh", lambda: st.workers)
loaded = job_load(path)
obs("job_load", {"type": type(loaded).__name__, "hosts": list(loaded.hosts),
                 "active": loaded.active})
back = job_loads(first.dumps())
obs("job_loads", {"hosts": list(back.hosts), "active": back.active})
other = MyJob(("workers",))
other_state = other.state(cached_path=None)
obs("no_cache", {"created": other.created, "meshes": sorted(other_state._hosts)})
