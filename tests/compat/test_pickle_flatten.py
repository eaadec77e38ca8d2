"""Monarch's pickle.flatten / unflatten (monarch_cy.compat._pickle), and the private
names of Monarch's that its tests read on meshes (monarch._src.actor.actor_mesh.
_client_context, HostMesh's native views)."""

from __future__ import annotations

import pickle
import threading
from unittest.mock import patch

import pytest

from monarch_cy.compat._pickle import flatten, unflatten


class Token:
    def __init__(self, n):
        self.n = n


def test_values_kept_out_come_back_in_place():
    a, b = Token(1), Token(2)
    obj = {"x": [a, 5, b], "y": (a, "s")}
    values, buf = flatten(obj, lambda o: isinstance(o, Token))
    assert values == [a, b, a]                    # each occurrence, in the order met
    data = buf.freeze()
    assert b"Token" not in data                   # not in the bytes
    back = unflatten(data, [Token(10), Token(20), Token(30)])
    assert [t.n for t in back["x"][::2]] == [10, 20] and back["y"][0].n == 30
    assert unflatten(buf, values)["x"][1] == 5
    with pytest.raises(pickle.UnpicklingError, match="no value 1 among the 1"):
        unflatten(data, [Token(0)])
    with pytest.raises(TypeError, match="filter"):
        flatten(obj, None)


def test_a_local_host_mesh_round_trips_as_this_host():
    from monarch_cy.actor import HostMesh, this_host
    values, buf = flatten(this_host(), lambda _: False)
    back = unflatten(buf.freeze(), values)
    assert isinstance(back, HostMesh) and back == this_host()
    with pytest.raises(RuntimeError, match="reference instead of owned"):
        back.shutdown()


def test_host_mesh_views_monarch_reads():
    from monarch_cy.actor import this_host
    hm = this_host()
    assert hm.extent.labels == [] and hm.is_fake_in_process is False
    native = hm._hy_host_mesh.block_on()
    assert native.region == hm.region and native.region.slice() == hm._ndslice
    assert hm._inner_host_mesh is hm._inner_host_mesh and hm._hy_host_mesh.poll() is native


def test_client_context_get_is_called_once_per_context_call():
    from monarch_cy._actor.model.actor import client_context, context
    calls = []
    orig = client_context.get
    with patch.object(client_context, "get", side_effect=lambda: calls.append(1) or orig()):
        threads = [threading.Thread(target=context) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(calls) == 8 and context().actor_instance.actor_id is not None
