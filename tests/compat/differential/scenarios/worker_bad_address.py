"""A worker address of an unknown scheme, given to attach_to_workers and to a worker
loop."""

from _obs import obs, step  # noqa: E402
from monarch.actor import attach_to_workers, run_worker_loop_forever  # noqa: E402


def attach():
    hosts = attach_to_workers(ca="trust_all_connections", workers=["udp://127.0.0.1:9"])
    return hosts.initialized.get(timeout=20)


step("attach", attach)
step("worker_loop", lambda: run_worker_loop_forever(address="udp://127.0.0.1:9",
                                                    ca="trust_all_connections"))
