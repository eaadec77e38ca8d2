"""Hosts and procs shared: a ProcessJob after local procs; two host meshes over the
same workers (two state() calls), stopping one stops only its procs; this_host() in a
proc names its host; an unpickled host mesh is a reference (shutdown raises);
is_fake_in_process; with_python_executable."""

import os
import sys
import tempfile

import cloudpickle
import monarch.actor
from _obs import obs, record_hook, report_hook, step  # noqa: E402

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, endpoint, this_host  # noqa: E402
from monarch.job import ProcessJob  # noqa: E402


class Where(Actor):
    @endpoint
    def pid(self):
        return os.getpid()

    @endpoint
    def host(self):
        return this_host()

    @endpoint
    def wrapped(self):
        return os.environ.get("DIFF_WRAPPED", "")


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


local = this_host().spawn_procs(per_host={"procs": 1}).spawn("l", Where)
step("local", lambda: local.pid.call_one().get(timeout=60) != os.getpid())
obs("fake", this_host().is_fake_in_process)
job = ProcessJob({"hosts": 2})
hm1 = job.state(cached_path=None).hosts
hm2 = job.state(cached_path=None).hosts
a1 = hm1.spawn_procs(per_host={"gpus": 1}, name="p1").spawn("a", Where)
a2 = hm2.spawn_procs(per_host={"gpus": 1}, name="p2").spawn("b", Where)
p1 = list(a1.pid.call().get(timeout=60).values())
p2 = list(a2.pid.call().get(timeout=60).values())
obs("this_host", list(a1.host.call().get(timeout=60).values())
    == [hm1.slice(hosts=0), hm1.slice(hosts=1)])
hm1.stop().get(timeout=60)
obs("after_stop", {"first_gone": not any(alive(p) for p in p1),
                   "second_alive": all(alive(p) for p in p2)})
ref = cloudpickle.loads(cloudpickle.dumps(hm2))
step("unpickled_shutdown", lambda: ref.shutdown().get(timeout=60))
step("shutdown", lambda: hm2.shutdown().get(timeout=60))
d = tempfile.mkdtemp(prefix="diff-")
wrapper = os.path.join(d, "py")
with open(wrapper, "w") as f:
    f.write(f'#!/bin/sh\nexport DIFF_WRAPPED=yes\nexec {sys.executable} "$@"\n')
os.chmod(wrapper, 0o755)
w = this_host().with_python_executable(wrapper).spawn_procs().spawn("w", Where)
step("wrapped", lambda: w.wrapped.call_one().get(timeout=60))
job.kill()
report_hook()
