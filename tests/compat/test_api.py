"""Monarch's public API names that monarch_cy adds for drop-in compatibility, each
checked against Monarch's documented semantics (own programs, written from the docs).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from _compat_actors import Aborter, Concurrent, Leaf, Mixed, Named, Parent, Registry
from monarch_cy.actor import (Accumulator, Actor, Channel, Future, MeshStoppedError, Port,
                              PortReceiver, SupervisionError, ValueMesh, context,
                              current_actor_name, endpoint, get_or_spawn_controller, send,
                              shutdown_context, unhandled_fault_hook)

pytestmark = pytest.mark.timeout(120)


def test_generics_are_subscriptable():
    # Monarch's own docs annotate ports: a class body with these must import.
    class Annotated(Actor):
        @endpoint(explicit_response_port=True)
        def produce(self, port: Port[int], n: int) -> None:
            port.send(n)

    for generic in (Port[int], PortReceiver[str], Channel[bytes], ValueMesh[float],
                    Future[int]):
        assert generic is not None
    from monarch_cy.actor import ActorMesh, Endpoint
    assert ActorMesh[Annotated] is not None and Endpoint[[int], int] is not None


def test_get_or_spawn_controller_is_one_actor_for_the_job(procs):
    reg = get_or_spawn_controller("reg_a", Registry, "from-client").get(20)
    assert reg.add.call_one("client").get(10) == 1
    # the same name from actors in two other processes reaches the same actor
    parents = procs.spawn("parents_reg", Parent)
    counts = parents.registry_add.call("reg_a", "actor").get(20).values()
    assert sorted(counts) == [2, 3]
    again = get_or_spawn_controller("reg_a", Registry, "ignored").get(20)
    pid, tag = again.where.call_one().get(10)
    assert (pid, tag) == (os.getpid(), "from-client")    # lives in the client process
    # another name is another actor
    other = get_or_spawn_controller("reg_b", Registry).get(20)
    assert other.add.call_one(1).get(10) == 1


def test_get_or_spawn_controller_reports_a_failed_controller():
    class Broken(Actor):
        def __init__(self):
            raise RuntimeError("controller init failed")

        @endpoint
        def ping(self):
            return 1

    mesh = get_or_spawn_controller("broken_ctl", Broken).get(20)
    with pytest.raises(SupervisionError, match="controller init failed"):
        mesh.ping.call_one().get(10)
    import time
    deadline = time.monotonic() + 10
    while True:           # the registry records the failure once it is reported
        try:
            get_or_spawn_controller("broken_ctl", Broken).get(20)
        except Exception as e:      # noqa: BLE001 - checked below
            assert "Failure on broken_ctl" in str(e)
            break
        assert time.monotonic() < deadline, "the failure never reached the registry"
        time.sleep(0.05)


def test_get_or_spawn_controller_bad_input():
    with pytest.raises(TypeError, match="subclass of Actor"):
        get_or_spawn_controller("x", object)
    with pytest.raises(TypeError, match="non-empty str"):
        get_or_spawn_controller("", Registry)


def test_send_free_function_with_and_without_port(procs):
    parents = procs.spawn("parents_send", Parent)
    port, recv = Channel[tuple].open()
    send(parents.reply_through, (port, "all"), {})
    got = sorted(recv.recv().get(10)[1] for _ in range(2))
    assert len(set(got)) == 2                       # both procs answered
    send(parents.reply_through, (port, "one"), {}, selection="choose")
    assert recv.recv().get(10)[0] == "one"
    # port=: each actor's result goes to the port
    leaves = procs.spawn("leaves_send", Leaf, "t")
    port2, recv2 = Channel.open()
    send(leaves.pid, (), {}, port=port2)
    pids = {recv2.recv().get(10)[0] for _ in range(2)}
    assert len(pids) == 2
    with pytest.raises(ValueError, match="selection"):
        send(leaves.pid, (), {}, selection="some")
    with pytest.raises(TypeError, match="args must be a tuple"):
        send(leaves.pid, [1], {})
    with pytest.raises(TypeError, match="endpoint of an actor mesh"):
        send(Leaf.pid, (), {})


def test_current_actor_name_and_message_rank(procs):
    assert current_actor_name() == "client[0]"
    assert dict(context().message_rank) == {}
    leaves = procs.spawn("leaves_rank", Leaf)
    full = leaves.message.call().get(10).values()
    assert [(r, name) for _, r, name in full] == [(0, "leaves_rank[0]"),
                                                  (1, "leaves_rank[1]")]
    assert full[1][0] == {"procs": 1}
    # a slice: the rank within the slice, not within the mesh
    sliced = leaves.slice(procs=slice(1, 2)).message.call().get(10).values()
    assert sliced == [({"procs": 0}, 0, "leaves_rank[1]")]
    one = leaves.message.choose().get(10)    # as Monarch: rank 0 of a slice of one
    assert one[0] == {"procs": 0} and one[1] == 0


def test_value_mesh_get(procs):
    vm = procs.spawn("leaves_vm", Leaf, "v").pid.call().get(10)
    assert vm.get(0) == vm.values()[0] and vm.get(1) == vm.values()[1]
    with pytest.raises(ValueError, match=r"^index 2 out of range \(len=2\)$"):
        vm.get(2)                                       # Monarch's type and text
    with pytest.raises(TypeError, match="rank must be an int"):
        vm.get("0")


def test_actor_mesh_stop(procs):
    leaves = procs.spawn("leaves_stop", Leaf, "s")
    assert len(leaves.pid.call().get(10).values()) == 2
    assert leaves.stop().get(10) == ()                 # Monarch's stop() gives ()
    with pytest.raises(MeshStoppedError, match="received explicit stop request"):
        leaves.pid.call().get(10)
    # the procs keep serving their other actors
    assert len(procs.spawn("leaves_after", Leaf).pid.call().get(10).values()) == 2


def test_endpoints_named_like_mesh_attributes(procs):
    m = procs.spawn("named", Named)
    assert m.stop.call().get(10).values() == ["stop endpoint"] * 2
    assert m.size.call().get(10).values() == ["size endpoint"] * 2
    assert m.sizes.call().get(10).values() == ["sizes endpoint"] * 2
    assert m.slice.call(1).get(10).values() == [2, 2]
    # the mesh operations stay reachable through the class
    from monarch_cy.actor import ActorMesh
    assert ActorMesh.size(m) == 2
    assert ActorMesh.stop(m).get(10) == ()


def test_mixing_sync_and_async_endpoints_is_refused(procs):
    with pytest.raises(ValueError, match="mixes both async and sync endpoints"):
        procs.spawn("mixed", Mixed)


def test_abort_fails_the_actor(procs):
    m = procs.spawn("aborter", Aborter)
    # as in Monarch, the aborting endpoint still finishes; later calls fail
    assert m.slice(procs=0).abort.call_one("enough").get(10) == "finished after abort"
    with pytest.raises(SupervisionError, match="explicitly aborted due to: enough"):
        m.slice(procs=0).ping.call_one().get(10)
    assert m.slice(procs=1).ping.call_one().get(10) == 1
    with pytest.raises(RuntimeError, match="abort\\(\\) is for actors"):
        context().actor_instance.abort("client")


def test_concurrent_endpoint(procs):
    m = procs.spawn("concurrent", Concurrent).slice(procs=0)
    slow = m.slow.call_one(0.5)
    events = m.fast.call_one().get(10)
    assert events == ["slow start", "fast"]          # fast ran while slow awaited
    assert slow.get(10) == "slow"
    with pytest.raises(ValueError, match="only wrap async"):
        from monarch_cy.actor import concurrent_endpoint

        class Bad(Actor):
            @concurrent_endpoint
            def f(self):
                return 1


def test_logging_option_is_awaitable(procs):
    async def main():
        await procs.logging_option(stream_to_client=True, aggregate_window_sec=None)
    asyncio.run(main())
    assert procs.logging_option().get(1) is None
    with pytest.raises(ValueError, match="aggregate_window_sec"):
        procs.logging_option(aggregate_window_sec=-1)


def test_accumulator(procs):
    m = procs.spawn("leaves_acc", Leaf, "x")
    acc = Accumulator(m.pid, 0, lambda a, r: a + 1)
    assert acc.accumulate().get(10) == 2
    with pytest.raises(TypeError, match="class attribute"):
        Accumulator(Leaf.pid, 0, lambda a, r: a)


def test_unhandled_fault_hook_is_public():
    assert callable(unhandled_fault_hook)


def test_shutdown_context_stops_every_mesh_and_is_idempotent(tmp_path):
    # In a fresh interpreter: shutting down is for the whole process.
    import subprocess
    import sys
    prog = tmp_path / "prog.py"
    prog.write_text(
        "from monarch_cy.actor import Actor, endpoint, this_host, shutdown_context\n"
        "import os\n"
        "class A(Actor):\n"
        "    @endpoint\n"
        "    def pid(self):\n"
        "        return os.getpid()\n"
        "pm = this_host().spawn_procs(per_host={'procs': 2})\n"
        "pids = pm.spawn('a', A).pid.call().get(20).values()\n"
        "f = shutdown_context()\n"
        "assert f.get(20) is None\n"
        "assert shutdown_context().get(1) is None\n"
        "for p in pids:\n"
        "    try:\n"
        "        os.kill(p, 0)\n"
        "    except ProcessLookupError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit(f'proc {p} still alive')\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_channel_open_ranked(procs):
    leaves = procs.spawn("leaves_ranked", Leaf, "r")
    port, recv = Channel.open_ranked()
    send(leaves.pid, (), {}, port=port)
    got = sorted(recv.recv().get(10) for _ in range(2))
    assert [rank for rank, _ in got] == [0, 1]
    assert all(value[1] == "r" for _, value in got)


def test_shutdown_context_bad_input():
    with pytest.raises(ValueError, match="host_timeout"):
        shutdown_context(host_timeout=-1)


def test_rdma_warning_names():
    from monarch_cy import rdma
    for name in ("RDMATcpFallbackWarning", "RDMAReadTransferWarning",
                 "RDMAWriteTransferWarning"):
        assert issubclass(getattr(rdma, name), Warning)
