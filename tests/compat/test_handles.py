"""Handles travel: meshes, ports and values pickle into references that work inside
any actor of the job, and are refused by any other job."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from _compat_actors import Leaf, Parent
from monarch_cy.actor import (Channel, Extent, HostMesh, Point, ProcMesh, ValueMesh,
                              this_host, this_proc)
from monarch_cy._errors import ForeignJobError

pytestmark = pytest.mark.timeout(120)


def test_actor_spawns_on_a_proc_mesh_it_was_given(procs):
    other = this_host().spawn_procs(per_host={"procs": 2})
    try:
        parent = procs.spawn("parent_pm", Parent, other)   # a ProcMesh in __init__
        got = parent.spawn_leaves.call("t").get(30).values()
        mine = {p for p, _ in other.spawn("probe", Leaf).pid.call().get(10).values()}
        for leaves in got:                     # each parent spawned on `other`'s procs
            assert {p for p, _ in leaves} == mine
            assert {t for _, t in leaves} == {"t"}
    finally:
        other.stop().get(10)


def test_actor_calls_an_actor_mesh_and_a_slice_it_was_given(procs):
    leaves = procs.spawn("leaves_given", Leaf, "g")
    parent = procs.spawn("parent_am", Parent).slice(procs=0)
    assert len(parent.call_mesh.call_one(leaves).get(10)) == 2
    assert len(parent.call_mesh.call_one(leaves.slice(procs=1)).get(10)) == 1


def test_actor_replies_through_a_port_it_was_given(procs):
    port, recv = Channel.open()
    parent = procs.spawn("parent_port", Parent).slice(procs=1)
    parent.reply_through.call_one(port, "v").get(10)
    value, pid = recv.recv().get(10)
    assert value == "v" and pid != os.getpid()


def test_proc_mesh_comes_back_as_the_same_mesh_and_stops_from_an_actor(procs):
    other = this_host().spawn_procs(per_host={"procs": 2})
    parent = procs.spawn("parent_keep", Parent).slice(procs=0)
    back = parent.keep.call_one(other.slice(procs=1)).get(10)
    assert isinstance(back, ProcMesh) and back._state is other._state
    assert back.sizes == {}                        # the slice it was sent as
    assert parent.stop_kept.call_one().get(30) is None     # stopped by the actor
    assert other._state.stopped
    assert other.stop().get(10) is None


def test_this_proc_and_host_mesh_travel(procs):
    parent = procs.spawn("parent_host", Parent).slice(procs=0)
    host = parent.keep.call_one(this_host()).get(10)
    assert isinstance(host, HostMesh)
    me = parent.keep.call_one(this_proc()).get(10)
    assert me._state is this_proc()._state


def test_actor_spawns_procs_of_its_own(procs):
    parent = procs.spawn("parent_own", Parent).slice(procs=0)
    got = parent.own_procs.call_one().get(60)
    assert len({p for p, _ in got}) == 2 and {t for _, t in got} == {"own"}


def test_values_and_shapes_travel(procs):
    parent = procs.spawn("parent_vals", Parent).slice(procs=0)
    ext = Extent(["hosts", "gpus"], [2, 4])
    vm = ValueMesh(ext, list(range(8)))
    for value in (ext, Point(5, ext), vm, vm.slice(gpus=1)):
        assert parent.keep.call_one(value).get(10) == value


def test_a_handle_from_another_job_is_refused():
    code = ("import pickle, sys\n"
            "from monarch_cy.actor import this_proc, Channel\n"
            "port, _ = Channel.open()\n"
            "sys.stdout.write(pickle.dumps((this_proc(), port)).hex())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             p for p in sys.path if p)))
    assert out.returncode == 0, out.stderr
    data = bytes.fromhex(out.stdout.strip())
    with pytest.raises(ForeignJobError, match="another monarch_cy job"):
        pickle.loads(data)
    assert issubclass(ForeignJobError, ValueError)


def test_port_receiver_stays_home():
    _, recv = Channel.open()
    with pytest.raises(TypeError, match="PortReceiver stays"):
        pickle.dumps(recv)


def test_a_remote_host_mesh_travels_as_a_reference():
    """Unpickled where its host set lives (the client), it names the same hosts; a set
    this process does not hold becomes a reference the client resolves."""
    from monarch_cy._actor.base.shape import Shape
    from monarch_cy._actor.meshes.host_refs import HostRef

    class Hosts:                              # the client's links (a HostSet's shape)
        uid, hosts = "a1b2", []
    hosts = Hosts()
    remote = HostMesh(Shape.dense(("hosts",), (2,)), hosts=hosts)
    back = pickle.loads(pickle.dumps(remote.slice(hosts=1)))
    assert back == remote.slice(hosts=1) and back._hosts is hosts
    with pytest.raises(RuntimeError, match="reference instead of owned"):
        back.shutdown()
    from monarch_cy._actor.base.state import job_tag
    from monarch_cy._actor.meshes.host_mesh import _rebuild_host_mesh
    other = _rebuild_host_mesh(job_tag(), "not-held-here", Shape.dense(("hosts",), (1,)))
    assert isinstance(other._hosts, HostRef) and other._hosts.uid == "not-held-here"
    with pytest.raises(RuntimeError, match="only the controller resolves its hosts"):
        other._hosts.resolve([0])
