"""Controller programs for tests/hosts/test_controller_address.py, one per process.

``python tests/hosts/_addr_scenarios.py NAME JSON_ARGS`` (the controller's actor
runtime is per process, and where it binds is what these tests look at).  Prints
``RESULT <json>`` on success; fails with a traceback otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from monarch_cy.actor import Actor, SupervisionError, endpoint  # noqa: E402


class Worker(Actor):
    @endpoint
    def where(self):
        return {"host": socket.gethostname(), "pid": os.getpid(),
                "rank": int(os.environ["MONARCH_CY_RANK"])}


def _attach(a):
    from monarch_cy.actor import attach_to_workers
    return attach_to_workers(workers=a["workers"], timeout=a.get("timeout", 10))


def _addrs() -> dict:
    from monarch_cy._actor.meshes.controllers import cc_address
    from monarch_cy._transport.node import current_node
    node = current_node()
    return {"addr": node.addr, "daddr": node.direct_addr, "cc": cc_address(node)}


def reachable(a):
    """Attach, start ``procs`` procs per host, call them all, stop."""
    hm = _attach(a)
    assert hm.initialized.get(20) is True
    procs = hm.spawn_procs(per_host={"procs": a.get("procs", 1)})
    where = procs.spawn("w", Worker).where.call().get(30)
    out = dict(_addrs(), pids=[v["pid"] for v in where.values()],
               ranks=[v["rank"] for v in where.values()])
    procs.stop().get(15)
    if a.get("then_remote"):
        # the runtime now runs on loopback: a worker elsewhere cannot reach it (the
        # check comes before any connection is made)
        from monarch_cy.actor import attach_to_workers
        try:
            attach_to_workers(workers=[a["then_remote"]], timeout=1)
            raise AssertionError("attaching a remote worker to a loopback runtime worked")
        except RuntimeError as e:
            out["remote_error"] = str(e)
    return out


def unreachable(a):
    """The agent is reachable, the controller's runtime is not: the procs fail."""
    hm = _attach(a)
    assert hm.initialized.get(20) is True
    t0 = time.monotonic()
    procs = hm.spawn_procs(per_host={"procs": 2})
    try:
        procs.spawn("w", Worker).where.call().get(30)
        raise AssertionError("procs that cannot reach the controller answered")
    except SupervisionError as e:
        return dict(_addrs(), error=str(e), took=time.monotonic() - t0)


def attach_error(a):
    """Attaching (or the host coming up) fails: the error's type and message."""
    t0 = time.monotonic()
    try:
        hm = _attach(a)
        hm.initialized.get(20)
        hm.spawn_procs(per_host={"procs": 1})
        raise AssertionError("attach and spawn worked")
    except Exception as e:      # noqa: BLE001 - the test looks at which
        return {"type": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__],
                "error": str(e), "took": time.monotonic() - t0}


if __name__ == "__main__":
    name, args = sys.argv[1], json.loads(sys.argv[2])
    result = globals()[name](args)
    print("RESULT " + json.dumps(result), flush=True)
