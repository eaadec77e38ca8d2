"""Workers started as Monarch's tests start them: run_worker_loop_forever with nothing
but an address (an ipc:// path, a socket inherited as fdN, an alias), attached with
attach_to_workers; shutdown() ends the workers."""

import os
import socket
import subprocess
import sys
import tempfile

import monarch.actor
from _obs import obs, record_hook, report_hook, step  # noqa: E402

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, attach_to_workers, endpoint  # noqa: E402


class Hello(Actor):
    @endpoint
    def doit(self):
        return "hello!"


# A worker is a plain Python program importing monarch; under monarch_cy a Monarch
# program's child runs under its compat layer too (as `python -m monarch_cy.compat`).
PY = [sys.executable, "-m", "monarch_cy.compat"] if "monarch_cy" in sys.modules \
    else [sys.executable]


def start(address, pass_fds=()):
    return subprocess.Popen(
        [*PY, "-c", "from monarch.actor import run_worker_loop_forever; "
         f"run_worker_loop_forever(address={address!r}, ca='trust_all_connections')"],
        pass_fds=pass_fds, stderr=subprocess.DEVNULL)


d = tempfile.mkdtemp(prefix="diff-")
procs, workers = [], []
procs.append(start(f"ipc://{d}/w0"))
workers.append(f"ipc://{d}/w0")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
procs.append(start(f"tcp://127.0.0.1:fd{s.fileno()}", (s.fileno(),)))
s.close()
workers.append(f"tcp://127.0.0.1:{port}")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
procs.append(start(f"tcp://127.0.0.1:{port}@tcp://0.0.0.0:{port}"))
workers.append(f"tcp://127.0.0.1:{port}@tcp://0.0.0.0:{port}")
try:
    hosts = attach_to_workers(ca="trust_all_connections", workers=workers)
    step("initialized", lambda: hosts.initialized.get(timeout=60))
    hello = hosts.spawn_procs(per_host={"gpus": 2}).spawn("hello", Hello)
    step("calls", lambda: sorted(hello.doit.call().get(timeout=60).values()))
    step("shutdown", lambda: hosts.shutdown().get(timeout=60))
    step("workers_exit", lambda: [p.wait(timeout=60) for p in procs])
finally:
    for p in procs:
        p.kill()
report_hook()
