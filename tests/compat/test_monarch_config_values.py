"""``monarch.config`` values as Monarch's tests read them: durations and their errors,
``cleanup_timeout``'s default and budget, ``default_transport`` as a BindSpec, a
proc starting with its spawner's configuration, and ``codec_max_frame_length``
bounding what is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from monarch_cy import _config
from monarch_cy import _config_api as api
from monarch_cy._config_transport import BindSpec, ChannelTransport
from monarch_cy.actor import Actor, endpoint, this_host
from monarch_cy.config import (ConfigValueError, Encoding, clear_runtime_config,
                               configured, get_global_config)
from monarch_cy.errors import ActorError, MessageTooLargeError, SupervisionError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def clean():
    clear_runtime_config()
    yield
    clear_runtime_config()


def test_defaults_match_monarch():
    g = get_global_config()
    assert g["cleanup_timeout"] == "3s"
    assert g["default_transport"] == BindSpec(ChannelTransport.Unix)
    assert g["codec_max_frame_length"] == 10 * 1024 ** 3
    assert g["rdma_ibverbs_target"] == ""


@pytest.mark.parametrize("key,text", [("host_spawn_ready_timeout", "invalid"),
                                      ("message_delivery_timeout", "30"),
                                      ("mesh_proc_spawn_max_idle", "abc123")])
def test_invalid_duration_is_a_type_error_saying_so(key, text):
    before = get_global_config()[key]
    with pytest.raises(TypeError, match="Invalid duration format") as ei:
        with configured(**{key: text}):
            pass
    assert isinstance(ei.value, ConfigValueError)
    assert f"`{key}`" in str(ei.value) and repr(text) in str(ei.value)
    assert get_global_config()[key] == before


def test_default_transport_is_kept_as_a_bind_spec():
    with configured(default_transport="tcp") as c:
        assert c["default_transport"] == BindSpec(ChannelTransport.TcpWithHostname)
        assert _config.transport() == "tcp"
    with configured(default_transport="tcp://127.0.0.1:8080") as c:
        assert c["default_transport"] == BindSpec("tcp://127.0.0.1:8080")
    for bad, kind in ((42, TypeError), ({}, TypeError), ("random_string", ValueError),
                      ("invalid://scheme", ValueError)):
        with pytest.raises(kind):
            with configured(default_transport=bad):
                pass
    assert get_global_config()["default_transport"] == BindSpec(ChannelTransport.Unix)


def test_cleanup_timeout_sets_the_cleanup_budget():
    with configured(cleanup_timeout="25s") as c:
        assert c["cleanup_timeout"] == "25s" and _config.cleanup_timeout() == 25.0
        assert _config.supervise_timeout() == 10.0        # __supervise__'s is its own
    assert _config.cleanup_timeout() == 3.0


def test_child_environment_carries_keys_and_overrides():
    assert api.child_environment() == {}
    with configured(tail_log_lines=7, default_encoding=Encoding.Json,
                    default_transport=ChannelTransport.TcpWithLocalhost,
                    rdma_ibverbs_target="nic:mlx5_0", host_spawn_ready_timeout="90s"):
        env = api.child_environment()
    assert env["MONARCH_CY_TAIL_LOG_LINES"] == "7"
    assert env["MONARCH_CY_RDMA_IBVERBS_TARGET"] == "nic:mlx5_0"
    keys = json.loads(env["MONARCH_CY_MONARCH_CONFIG"])
    assert keys["default_encoding"] == {"encoding": "Json"}
    assert keys["default_transport"] == {"transport": "TcpWithLocalhost"}
    # a fresh interpreter with that environment starts with those values
    code = ("from monarch_cy._config_api import get_global_config as g; "
            "from monarch_cy._config_transport import BindSpec, ChannelTransport as T; "
            "c = g(); print(c['tail_log_lines'], c['default_encoding'].name, "
            "c['default_transport'] == BindSpec(T.TcpWithLocalhost), "
            "c['rdma_ibverbs_target'], c['host_spawn_ready_timeout'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env, "PYTHONPATH": ROOT}, timeout=60)
    assert out.stdout.split() == ["7", "Json", "True", "nic:mlx5_0", "1m", "30s"], out


def test_a_bad_inherited_value_is_left_out():
    code = ("from monarch_cy._config_api import get_runtime_config as r; print(r())")
    env = {**os.environ, "PYTHONPATH": ROOT, "MONARCH_CY_MONARCH_CONFIG": json.dumps(
        {"tail_log_lines": "many", "no_such_key": 1, "stop_actor_timeout": "15s"})}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.stdout.strip() == "{'stop_actor_timeout': '15s'}", out


class ConfigReader(Actor):
    @endpoint
    def read(self, keys):
        g = api.get_global_config()
        return [g[k] for k in keys]

    @endpoint
    def cleanup_budget(self):
        return _config.cleanup_timeout()


def test_procs_start_with_their_spawners_configuration():
    keys = ["rdma_ibverbs_target", "tail_log_lines", "cleanup_timeout"]
    with configured(rdma_ibverbs_target="nic:mlx5_0", tail_log_lines=5,
                    cleanup_timeout="9s"):
        pm = this_host().spawn_procs(per_host={"procs": 1})
        r = pm.spawn("reader", ConfigReader)
        assert r.read.call_one(keys).get(30) == ["nic:mlx5_0", 5, "9s"]
        assert r.cleanup_budget.call_one().get(30) == 9.0
    try:
        # procs already started keep theirs; procs started now get the defaults
        assert r.read.call_one(keys).get(30) == ["nic:mlx5_0", 5, "9s"]
        pm2 = this_host().spawn_procs(per_host={"procs": 1})
        try:
            r2 = pm2.spawn("reader", ConfigReader)
            assert r2.read.call_one(keys).get(30) == ["", 0, "3s"]
        finally:
            pm2.stop().get(30)
    finally:
        pm.stop().get(30)


class Chunker(Actor):
    @endpoint
    def count(self, chunks):
        return len(chunks)

    @endpoint
    def make(self, n):
        return bytes(n)


def test_codec_max_frame_length_bounds_what_is_sent():
    mib = 1024 * 1024
    pm = this_host().spawn_procs(per_host={"procs": 2})
    try:
        with configured(codec_max_frame_length=mib):
            c = pm.spawn("chunker", Chunker)
            assert c.slice(procs=0).count.call_one([b"x"] * 3).get(30) == 3
            t0 = time.monotonic()
            with pytest.raises(SupervisionError, match=r"rejecting oversize frame: "
                               r"len=\d+ > max=1048576") as ei:
                c.slice(procs=0).count.call_one([bytes(mib // 4) for _ in range(4)]).get(30)
            assert time.monotonic() - t0 < 10           # refused, not timed out
            assert ei.value.endpoint == "chunker.count()"
            # every adverb fails its future the same way; nothing was sent
            with pytest.raises(SupervisionError, match="oversize frame"):
                c.count.call([bytes(mib)]).get(30)
            with pytest.raises(SupervisionError, match="oversize frame"):
                next(iter(c.count.stream([bytes(mib)]))).get(30)
            with pytest.raises(MessageTooLargeError):
                c.count.broadcast([bytes(mib)])
            with pytest.raises(MessageTooLargeError) as ei2:
                pm.spawn("big", Chunker, bytes(2 * mib))
            assert ei2.value.limit == mib and ei2.value.size > 2 * mib
            # the actor serves on
            assert c.slice(procs=1).count.call_one([b"y"]).get(30) == 1
        # the limit ends with the configuration (this process's sends)
        assert c.slice(procs=0).count.call_one([bytes(mib // 4) for _ in range(4)]).get(30) == 4
    finally:
        pm.stop().get(30)


def test_a_reply_over_the_procs_limit_fails_the_call():
    with configured(codec_max_frame_length=1024 * 1024):
        pm = this_host().spawn_procs(per_host={"procs": 1})
    try:
        c = pm.spawn("chunker", Chunker)
        assert len(c.make.call_one(1000).get(30)) == 1000
        with pytest.raises(ActorError, match="the result of endpoint make on rank 0 of "
                           "chunker cannot be sent: MessageTooLargeError: rejecting "
                           r"oversize frame: len=\d+ > max=1048576"):
            c.make.call_one(2 * 1024 * 1024).get(30)
        assert len(c.make.call_one(10).get(30)) == 10
    finally:
        pm.stop().get(30)
