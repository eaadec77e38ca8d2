"""``monarch.config`` (monarch_cy.config): Monarch's keys, types and defaults; the keys
with a monarch_cy equivalent change what ``monarch_cy._config`` returns; the others
are recorded; errors name the key and value; ``configured`` restores."""

from __future__ import annotations

import pytest

from monarch_cy import _config
from monarch_cy import _config_api as api
from monarch_cy._config_transport import BindSpec
from monarch_cy.config import (ChannelTransport, ConfigValueError, Encoding,
                               clear_runtime_config, configure, configured,
                               get_global_config, get_runtime_config, parametrize_config,
                               parametrize_config_pointwise)

P = "MONARCH_CY_"      # variable names are built from it (see tests/test_config.py)

# Monarch's keys the task names, with 0.7.0's defaults
REQUIRED = {
    "default_transport": BindSpec(ChannelTransport.Unix), "enable_log_forwarding": False,
    "tail_log_lines": 0, "message_delivery_timeout": "30s",
    "host_spawn_ready_timeout": "30s", "stop_actor_timeout": "10s",
    "rdma_disable_ibverbs": False, "rdma_allow_tcp_fallback": True,
}


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for suffix in ("TRANSPORT", "CAST_FANOUT", "ATTACH_TIMEOUT", "SUPERVISE_TIMEOUT",
                   "RDMA_VERBS", "CLEANUP_TIMEOUT", "MAX_MESSAGE_BYTES",
                   "RDMA_IBVERBS_TARGET", "MONARCH_CONFIG"):
        monkeypatch.delenv(P + suffix, raising=False)
    clear_runtime_config()
    yield
    clear_runtime_config()
    assert _config.overrides() == {}


def test_keys_types_and_defaults():
    assert len(api.KEYS) == 84
    g = get_global_config()
    assert set(g) == set(api.KEYS)
    for key, default in REQUIRED.items():
        assert g[key] == default, key
    assert g["message_latency_sampling_rate"] == 0.01
    assert g["default_encoding"] is Encoding.Multipart
    assert g["rdma_max_nics_per_buffer"] is None
    assert get_runtime_config() == {}
    g["tail_log_lines"] = 5                       # a copy
    assert get_global_config()["tail_log_lines"] == 0


def test_recorded_keys_are_returned():
    configure(tail_log_lines=100, message_delivery_timeout="2m",
              enable_log_forwarding=True, stop_actor_timeout="100ms",
              rdma_allow_tcp_fallback=False, default_encoding=Encoding.Json,
              rdma_max_nics_per_buffer=None, message_latency_sampling_rate=1)
    rt = get_runtime_config()
    assert rt == {"tail_log_lines": 100, "message_delivery_timeout": "2m",
                  "enable_log_forwarding": True, "stop_actor_timeout": "100ms",
                  "rdma_allow_tcp_fallback": False, "default_encoding": Encoding.Json,
                  "rdma_max_nics_per_buffer": None, "message_latency_sampling_rate": 1.0}
    g = get_global_config()
    assert {k: g[k] for k in rt} == rt
    assert g["cleanup_timeout"] == "3s"          # mapped, from MONARCH_CY_CLEANUP_TIMEOUT
    # only tail_log_lines has a monarch_cy equivalent: the others change no variable
    assert _config.overrides() == {"MONARCH_CY_TAIL_LOG_LINES": "100"}


@pytest.mark.parametrize("text,normal,seconds", [
    ("1h30m", "1h 30m", 5400.0), ("1.5s", "1s 500ms", 1.5), ("500ms", "500ms", 0.5),
    ("10 s", "10s", 10.0), ("2min", "2m", 120.0), ("1d", "1day", 86400.0),
    ("1h 30m 10s", "1h 30m 10s", 5410.0)])
def test_durations_are_normalized(text, normal, seconds):
    configure(message_delivery_timeout=text, host_spawn_ready_timeout=text)
    assert get_runtime_config()["message_delivery_timeout"] == normal
    assert _config.attach_timeout() == pytest.approx(seconds)


def test_transport_maps_onto_the_transport_variable(monkeypatch):
    assert _config.transport() == "unix"
    configure(default_transport=ChannelTransport.TcpWithLocalhost)
    assert _config.transport() == "tcp"
    configure(default_transport="unix")
    assert _config.transport() == "unix"
    configure(default_transport="tcp://127.0.0.1:8080")
    assert _config.transport() == "tcp"
    assert get_runtime_config()["default_transport"] == BindSpec("tcp://127.0.0.1:8080")
    # the runtime layer wins over the environment ...
    monkeypatch.setenv(P + "TRANSPORT", "ipc")
    assert _config.transport() == "tcp"
    # ... and a transport with no equivalent here leaves the variable to it
    configure(default_transport=ChannelTransport.MetaTlsWithHostname)
    assert _config.transport() == "ipc"
    assert get_runtime_config()["default_transport"] == \
        BindSpec(ChannelTransport.MetaTlsWithHostname)
    clear_runtime_config()
    assert get_global_config()["default_transport"] == BindSpec(ChannelTransport.Unix)  # ipc


def test_mapped_keys_change_config():
    configure(max_cast_fanout=4, host_spawn_ready_timeout="1m 30s",
              cleanup_timeout="2s", rdma_disable_ibverbs=True)
    assert _config.cast_fanout() == 4
    assert _config.attach_timeout() == 90.0
    assert _config.cleanup_timeout() == 2.0
    assert _config.rdma_verbs() is False
    configure(rdma_disable_ibverbs=False)
    assert _config.rdma_verbs() is True
    clear_runtime_config()
    assert (_config.cast_fanout(), _config.attach_timeout(), _config.cleanup_timeout()) \
        == (16, 30.0, 3.0)


def test_global_config_shows_the_environment_for_mapped_keys(monkeypatch):
    monkeypatch.setenv(P + "ATTACH_TIMEOUT", "7")
    monkeypatch.setenv(P + "CAST_FANOUT", "3")
    monkeypatch.setenv(P + "TRANSPORT", "tcp")
    g = get_global_config()
    assert g["host_spawn_ready_timeout"] == "7s"
    assert g["max_cast_fanout"] == 3
    assert g["default_transport"] == BindSpec(ChannelTransport.TcpWithLocalhost)


def test_unknown_key_lists_the_known_ones():
    with pytest.raises(ValueError) as ei:
        configure(tail_log_lines=5, no_such_key=1)
    msg = str(ei.value)
    assert "`no_such_key`" in msg
    for key in REQUIRED:
        assert key in msg
    assert get_runtime_config() == {}            # nothing applied


@pytest.mark.parametrize("key,value", [
    ("tail_log_lines", "100"), ("tail_log_lines", -1), ("tail_log_lines", 1.5),
    ("tail_log_lines", None), ("enable_log_forwarding", 1),
    ("enable_log_forwarding", "true"), ("message_delivery_timeout", 5),
    ("message_delivery_timeout", "30"), ("message_delivery_timeout", ""),
    ("message_delivery_timeout", "abc"), ("default_transport", "bogus"),
    ("default_transport", 5), ("default_encoding", "json"), ("pyspy_bin", None),
    ("max_cast_dimension_size", 2 ** 70), ("message_latency_sampling_rate", "0.5"),
    ("host_spawn_ready_timeout", "0s"),          # MONARCH_CY_ATTACH_TIMEOUT must be > 0
])
def test_bad_values(key, value):
    configure(max_cast_fanout=5)
    with pytest.raises(ConfigValueError) as ei:
        configure(max_cast_fanout=6, **{key: value})
    e = ei.value
    assert isinstance(e, TypeError) and isinstance(e, ValueError)
    assert f"`{key}`" in str(e) and repr(value) in str(e)
    assert get_runtime_config() == {"max_cast_fanout": 5}      # nothing applied
    assert _config.cast_fanout() == 5


def test_bools_count_as_ints_as_in_monarch():
    configure(tail_log_lines=True)
    assert get_runtime_config()["tail_log_lines"] == 1


def test_configured_restores():
    configure(tail_log_lines=3, max_cast_fanout=8)
    with configured(tail_log_lines=100, max_cast_fanout=2,
                    default_transport="tcp") as merged:
        assert merged["tail_log_lines"] == 100
        assert _config.cast_fanout() == 2 and _config.transport() == "tcp"
    assert get_runtime_config() == {"tail_log_lines": 3, "max_cast_fanout": 8}
    assert _config.cast_fanout() == 8 and _config.transport() == "unix"
    with pytest.raises(RuntimeError):
        with configured(max_cast_fanout=1):
            raise RuntimeError("body failed")
    assert _config.cast_fanout() == 8
    with pytest.raises(ValueError):
        with configured(bogus_key=1):
            pass
    assert get_runtime_config() == {"tail_log_lines": 3, "max_cast_fanout": 8}


def test_override_layer_of_config():
    _config.set_override(P + "CAST_FANOUT", "9")
    try:
        assert _config.cast_fanout() == 9
        assert _config.get(P + "CAST_FANOUT", {}) == 16        # an explicit environ
        with pytest.raises(ValueError, match=P + "CAST_FANOUT"):
            _config.set_override(P + "CAST_FANOUT", "-3")
        assert _config.cast_fanout() == 9                      # unchanged
        with pytest.raises(KeyError):
            _config.set_override(P + "NOT_DECLARED", "1")
    finally:
        _config.clear_override(P + "CAST_FANOUT")
    assert _config.cast_fanout() == 16


def test_under_compat():
    import monarch_cy.compat as compat
    import monarch_cy.config
    compat.uninstall()
    compat.install()
    try:
        import monarch
        from monarch.config import configure as c2, configured as c3
        assert (c2, c3) == (configure, configured)
        assert monarch.configure is configure
        monarch.configure(tail_log_lines=7)
        assert monarch.get_runtime_config() == {"tail_log_lines": 7}
        assert monarch.config is monarch_cy.config
    finally:
        compat.uninstall()


@parametrize_config(tail_log_lines={1, 2}, max_cast_fanout={3})
def test_parametrize_config(request):
    rt = get_runtime_config()
    assert rt["tail_log_lines"] in (1, 2) and _config.cast_fanout() == 3


@parametrize_config_pointwise(tail_log_lines=[4, 5], max_cast_fanout=[6, 7])
def test_parametrize_config_pointwise():
    rt = get_runtime_config()
    assert rt["max_cast_fanout"] - rt["tail_log_lines"] == 2 == _config.cast_fanout() - \
        rt["tail_log_lines"]


def test_parametrize_config_pointwise_lengths():
    with pytest.raises(ValueError, match="same number of values"):
        parametrize_config_pointwise(tail_log_lines=[1, 2], max_cast_fanout=[1])
    with pytest.raises(ValueError):
        parametrize_config()
