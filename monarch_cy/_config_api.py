"""Monarch's runtime configuration API (``monarch.config``) over :mod:`monarch_cy._config`.

``configure(**kw)`` takes Monarch's keys (the 84 of torchmonarch 0.7.0, with its
types and defaults) and records them in this process's *runtime layer*.  A key
with a monarch_cy equivalent also sets that ``MONARCH_CY_*`` variable's runtime
override (:func:`monarch_cy._config.set_override`), so what the package reads
changes; :data:`MAPPED` lists those keys.  Every other key is checked and recorded
(``get_runtime_config``/``get_global_config`` return it) and has no effect here.

As in Monarch, the runtime layer belongs to this process: processes started
afterwards do not inherit it (set the ``MONARCH_CY_*`` variable, or
``spawn_procs(env=...)``, to reach them).

Errors: an unknown key is a ``ValueError`` naming it and listing the known keys; a
value of the wrong type or out of range is a :class:`ConfigValueError` (both a
``TypeError``, as Monarch raises, and a ``ValueError``) naming the key and the
value.  ``configure`` checks every value before it applies any.

Durations are humantime strings (``"30s"``, ``"1m 30s"``, ``"500ms"``, ``"1h30m"``,
``"1.5s"``); the runtime layer keeps them normalized as Monarch does
(``"1h30m"`` -> ``"1h 30m"``, ``"1.5s"`` -> ``"1s 500ms"``).

Imports only the standard library and :mod:`monarch_cy._config`.
"""

from __future__ import annotations

import contextlib
import enum
import re
import threading
from typing import Any, Callable, Dict, Iterator

from monarch_cy import _config
from monarch_cy._errors import ConfigValueError

__all__ = ["ChannelTransport", "ConfigValueError", "Encoding", "KEYS", "MAPPED",
           "clear_runtime_config", "configure", "configured", "get_global_config",
           "get_runtime_config", "parametrize_config", "parametrize_config_pointwise",
           "parse_duration", "format_duration"]


class ChannelTransport(enum.Enum):
    """Monarch's channel transports (``default_transport``).  monarch_cy honours
    ``Unix`` and the two ``Tcp`` kinds (``MONARCH_CY_TRANSPORT``); the others are
    accepted and recorded only."""

    TcpWithLocalhost = "tcp(localhost)"
    TcpWithHostname = "tcp(hostname)"
    MetaTlsWithHostname = "metatls(hostname)"
    MetaTlsWithIpV6 = "metatls(ipv6)"
    MetaQuicWithHostname = "metaquic(hostname)"
    MetaQuicWithIpV6 = "metaquic(ipv6)"
    Quic = "quic"
    Tls = "tls"
    Local = "local"
    Unix = "unix"


class Encoding(enum.Enum):
    """Monarch's message encodings (``default_encoding``); recorded only: monarch_cy
    always encodes with cloudpickle plus out-of-band buffers."""

    Bincode = "bincode"
    Json = "json"
    Multipart = "multipart"


# -- durations (humantime) -------------------------------------------------------------

_UNITS = {}
for _names, _secs in ((("nsec", "ns"), 1e-9), (("usec", "us", "\u00b5s"), 1e-6),
                      (("msec", "ms"), 1e-3),
                      (("seconds", "second", "secs", "sec", "s"), 1.0),
                      (("minutes", "minute", "mins", "min", "m"), 60.0),
                      (("hours", "hour", "hrs", "hr", "h"), 3600.0),
                      (("days", "day", "d"), 86400.0),
                      (("weeks", "week", "w"), 604800.0),
                      (("months", "month", "M"), 2630016.0),
                      (("years", "year", "y"), 31557600.0)):
    for _n in _names:
        _UNITS[_n] = _secs
_PART = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([A-Za-z\u00b5]+)")


def parse_duration(text: str) -> float:
    """Seconds in a humantime duration (``"1m 30s"``); ``ValueError`` otherwise."""
    s = text.strip()
    if not s:
        raise ValueError("a duration must not be empty")
    pos, total = 0, 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or m.group(2) not in _UNITS:
            raise ValueError(f"{text!r} is not a duration: use a number and a unit, "
                             "e.g. '30s', '500ms', '1m 30s'")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


def format_duration(seconds: float) -> str:
    """``seconds`` as Monarch prints a duration: ``"1h 30m"``, ``"1s 500ms"``,
    ``"2days"``, ``"0s"``."""
    if seconds != seconds or seconds == float("inf"):
        return "inf"
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    out = []
    for unit, size in (("day", 86400 * 10**9), ("h", 3600 * 10**9), ("m", 60 * 10**9),
                       ("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1)):
        n, ns = divmod(ns, size)
        if n:
            out.append(f"{n}{unit}{'s' if unit == 'day' and n > 1 else ''}")
    return " ".join(out)


# -- the keys ------------------------------------------------------------------------

class _Key:
    __slots__ = ("name", "kind", "default")

    def __init__(self, name: str, kind: str, default: Any) -> None:
        self.name, self.kind, self.default = name, kind, default


def _keys(kind: str, pairs: str) -> list:
    out = []
    for item in pairs.split():
        name, _, d = item.partition("=")
        default: Any = d
        if kind in ("int", "opt_int"):
            default = None if d == "None" else int(d)
        elif kind == "bool":
            default = d == "True"
        elif kind == "str":
            default = "" if d == "''" else d
        out.append(_Key(name, kind, default))
    return out


#: Monarch's keys (torchmonarch 0.7.0's ``get_global_config()``), with its defaults.
KEYS: dict = {k.name: k for k in sorted(
    _keys("duration", """
        actor_spawn_max_idle=30s channel_net_rx_buffer_full_check_interval=5s
        channel_reconnect_timeout=1m channel_tcp_keepalive_idle=1m cleanup_timeout=3s
        forwarder_flush_timeout=5s get_actor_state_max_idle=30s
        get_proc_state_max_idle=1m host_spawn_ready_timeout=30s
        mesh_admin_config_dump_bridge_timeout=5s mesh_admin_pyspy_bridge_timeout=13s
        mesh_admin_pyspy_client_timeout=20s mesh_admin_pyspy_max_profile_duration=5m
        mesh_admin_pyspy_timeout=10s mesh_admin_query_child_timeout=100ms
        mesh_admin_resolve_actor_timeout=200ms mesh_admin_single_host_timeout=3s
        mesh_admin_tree_timeout=10s mesh_attach_config_timeout=1m mesh_orphan_timeout=1m
        mesh_proc_spawn_max_idle=30s mesh_terminate_timeout=10s
        message_ack_time_interval=500ms message_delivery_timeout=30s
        otel_metric_export_interval=1s pending_actor_delivery_timeout=30s
        proc_stop_max_idle=30s process_exit_timeout=10s
        process_memory_metric_interval=5m rdma_qp_init_timeout=30s
        server_heartbeat_interval=1s split_max_buffer_age=50ms stop_actor_timeout=10s
        stop_grace_period=10s supervision_watchdog_timeout=2m""")
    + _keys("str", """
        channel_tcp_congestion='' file_log_level='' mesh_admin_addr=[::]:1729
        monarch_log_suffix='' proc_launcher_kind='' pyspy_bin='' rdma_ibverbs_target=''
        rdma_peer_device_affinity=''""")
    + _keys("int", """
        codec_max_frame_length=10737418240 max_cast_dimension_size=16 max_cast_fanout=16
        mesh_admin_max_concurrent_resolves=2 mesh_terminate_concurrency=16
        message_ack_every_n_messages=1000 message_ttl_default=64
        rdma_max_chunk_size_mb=64 rdma_min_stripe_size_kb=512 rdma_qps_per_cq=64
        rdma_qps_per_peer=4 rdma_runtime_worker_threads=4
        rdma_tcp_fallback_parallelism=1 read_log_buffer=100
        sequencer_max_locked_keys=128 small_write_threshold=256 split_max_buffer_size=5
        tail_log_lines=0 terminated_snapshot_retention=100""")
    + _keys("opt_int", "rdma_max_nics_per_buffer=None tokio_worker_threads=None")
    + _keys("bool", """
        enable_dest_actor_reordering_buffer=True enable_file_capture=False
        enable_log_forwarding=False enable_otel_metrics=True enable_otel_tracing=True
        enable_recorder_tracing=True enable_sqlite_tracing=False
        enable_unawaited_python_task_traceback=False force_file_log=False
        mesh_bootstrap_enable_pdeathsig=True prefix_with_rank=True
        rdma_allow_tcp_fallback=True rdma_cq_poller_per_device=True
        rdma_disable_ibverbs=False rdma_host_odp=False scuba_log_enter_exit=False
        use_direct_spawn=False""")
    + [_Key("message_latency_sampling_rate", "float", 0.01),
       _Key("default_encoding", "encoding", Encoding.Multipart),
       _Key("default_transport", "transport", ChannelTransport.Unix)],
    key=lambda k: k.name)}

_U64 = 2 ** 64


def _bad(key: str, value: Any, need: str) -> ConfigValueError:
    return ConfigValueError(f"invalid value {value!r} for configuration key "
                            f"`{key}`: {need}")


_TRANSPORT_WORDS = ("unix", "local", "tls", "tcp")
_TRANSPORT_URL = re.compile(r"^(tcp|unix|ipc|tls|metatls|local|quic|metaquic)://.+")


def _check(key: _Key, v: Any) -> Any:
    """``v`` as the runtime layer keeps it, or :class:`ConfigValueError`."""
    k = key.kind
    if k == "bool":
        if not isinstance(v, bool):
            raise _bad(key.name, v, "expected a bool")
        return v
    if k in ("int", "opt_int"):
        if v is None and k == "opt_int":
            return None
        if not isinstance(v, int):                   # bool is an int, as in Monarch
            raise _bad(key.name, v, "expected an int" + (" or None" if k == "opt_int"
                                                          else ""))
        if not 0 <= v < _U64:
            raise _bad(key.name, v, "expected an int >= 0")
        return int(v)
    if k == "float":
        if not isinstance(v, (int, float)) or v != v:
            raise _bad(key.name, v, "expected a number")
        return float(v)
    if k == "str":
        if not isinstance(v, str):
            raise _bad(key.name, v, "expected a str")
        return v
    if k == "duration":
        if not isinstance(v, str):
            raise _bad(key.name, v, "expected a duration string such as '30s' or '1m 30s'")
        try:
            return format_duration(parse_duration(v))
        except ValueError as e:
            raise _bad(key.name, v, str(e)) from None
    if k == "encoding":
        if not isinstance(v, Encoding):
            raise _bad(key.name, v, "expected an Encoding (Encoding.Bincode, .Json or "
                       ".Multipart)")
        return v
    # transport
    if isinstance(v, ChannelTransport):
        return v
    if not isinstance(v, str):
        raise _bad(key.name, v, "expected a ChannelTransport or a str")
    if v.strip().lower() not in _TRANSPORT_WORDS and not _TRANSPORT_URL.match(v.strip()):
        raise _bad(key.name, v, "expected a ChannelTransport, one of "
                   f"{', '.join(_TRANSPORT_WORDS)}, or an address such as "
                   "'tcp://127.0.0.1:8080'")
    return v


# -- the keys monarch_cy honours -------------------------------------------------------

def _transport_raw(v) -> str | None:
    if isinstance(v, ChannelTransport):
        return {ChannelTransport.Unix: "unix", ChannelTransport.TcpWithLocalhost: "tcp",
                ChannelTransport.TcpWithHostname: "tcp"}.get(v)
    s = v.strip().lower()
    if s == "unix" or s.startswith(("unix://", "ipc://")):
        return "unix"
    if s == "tcp" or s.startswith("tcp://"):
        return "tcp"
    return None


def _transport_back(v: str):
    return ChannelTransport.TcpWithLocalhost if v == "tcp" else ChannelTransport.Unix


def _secs_raw(v: str) -> str:
    return repr(parse_duration(v))


#: Monarch key -> (``MONARCH_CY_*`` variable, value -> raw variable text or None when
#: the value has no equivalent here, variable value -> Monarch value, what it does).
MAPPED: Dict[str, tuple] = {
    "default_transport": (
        "MONARCH_CY_TRANSPORT", _transport_raw, _transport_back,
        "`Unix` (or `unix`, `unix://...`, `ipc://...`) and `TcpWithLocalhost` / "
        "`TcpWithHostname` (or `tcp`, `tcp://...`) set the transport between the "
        "processes of one host; other transports are recorded only. Read when the "
        "actor runtime starts, so set it before the first mesh (as in Monarch)."),
    "max_cast_fanout": (
        "MONARCH_CY_CAST_FANOUT", str, int,
        "The cast tree's fan-out; read when the controller first calls a mesh."),
    "host_spawn_ready_timeout": (
        "MONARCH_CY_ATTACH_TIMEOUT", _secs_raw, format_duration,
        "How long each host agent has to answer `attach_to_workers` (must be > 0)."),
    "cleanup_timeout": (
        "MONARCH_CY_SUPERVISE_TIMEOUT", _secs_raw, format_duration,
        "How long `__cleanup__` / `__supervise__` may run before counting as hung; "
        "read in the actor's process, so here it covers actors of this process "
        "(`get_or_spawn_controller`'s)."),
    "tail_log_lines": (
        "MONARCH_CY_TAIL_LOG_LINES", str, lambda v: 0 if v is None else int(v),
        "How many of a dead proc's last lines of output its failure text carries; "
        "read by the controller as each proc starts."),
    "rdma_disable_ibverbs": (
        "MONARCH_CY_RDMA_VERBS", lambda v: "0" if v else "1", lambda v: not v,
        "`True`: this process never uses ibverbs (the other RDMABuffer backends "
        "serve); read once per process, at the first verbs use."),
}

_lock = threading.RLock()
_runtime: Dict[str, Any] = {}


def _unknown(name: str) -> ValueError:
    return ValueError(f"invalid configuration key: `{name}`; the known keys are: "
                      f"{', '.join(KEYS)}")


def configure(**kwargs: Any) -> None:
    """Set Monarch configuration keys in this process's runtime layer (see the module
    docstring).  Nothing is applied unless every key and value is valid."""
    checked = []
    for name, value in kwargs.items():
        key = KEYS.get(name)
        if key is None:
            raise _unknown(name)
        v = _check(key, value)
        raw = None
        m = MAPPED.get(name)
        if m is not None:
            raw = m[1](v)
            if raw is not None:
                try:
                    _config.VARIABLES[m[0]].read({m[0]: raw})
                except ValueError as e:
                    raise _bad(name, value, str(e)) from None
        checked.append((name, v, raw))
    with _lock:
        for name, v, raw in checked:
            _runtime[name] = v
            m = MAPPED.get(name)
            if m is not None:
                if raw is None:
                    _config.clear_override(m[0])
                else:
                    _config.set_override(m[0], raw)


def get_runtime_config() -> Dict[str, Any]:
    """The keys set by :func:`configure` (and not cleared since), with their values;
    a copy."""
    with _lock:
        return dict(_runtime)


def get_global_config() -> Dict[str, Any]:
    """Every key's value now: the runtime layer's, else for a key monarch_cy honours
    what its ``MONARCH_CY_*`` variable says (environment or default), else Monarch's
    default.  A copy: changing it changes nothing."""
    with _lock:
        runtime = dict(_runtime)
    out = {}
    for name, key in KEYS.items():
        if name in runtime:
            out[name] = runtime[name]
        elif name in MAPPED:
            var, _, back, _ = MAPPED[name]
            out[name] = back(_config.get(var))
        else:
            out[name] = key.default
    return out


def clear_runtime_config() -> None:
    """Forget every key set by :func:`configure` (their variables go back to the
    environment or their defaults)."""
    with _lock:
        _runtime.clear()
        for var, *_ in MAPPED.values():
            _config.clear_override(var)


@contextlib.contextmanager
def configured(**overrides: Any) -> Iterator[Dict[str, Any]]:
    """Apply ``overrides`` for the ``with`` block and yield :func:`get_global_config`;
    on exit the runtime layer is restored to what it was (also after an error)."""
    prev = get_runtime_config()
    try:
        configure(**overrides)
        yield get_global_config()
    finally:
        clear_runtime_config()
        configure(**prev)


def _wrap(fn: Callable, sig) -> Callable:
    import functools
    import inspect

    if inspect.iscoroutinefunction(fn):
        async def wrapper(_config_overrides, *args, **kwargs):
            with configured(**_config_overrides):
                return await fn(*args, **kwargs)
    else:
        def wrapper(_config_overrides, *args, **kwargs):
            with configured(**_config_overrides):
                return fn(*args, **kwargs)
    functools.update_wrapper(wrapper, fn)
    wrapper.__signature__ = sig   # type: ignore[attr-defined]
    return wrapper


def _parametrize(combos: list, keys: list) -> Callable:
    import inspect

    import pytest  # deferred: only these pytest helpers need it

    ids = ["-".join(f"{k}={v}" for k, v in zip(keys, c)) for c in combos]
    dicts = [dict(zip(keys, c)) for c in combos]

    def decorator(fn):
        sig = inspect.signature(fn)
        sig = sig.replace(parameters=[inspect.Parameter(
            "_config_overrides", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *sig.parameters.values()])
        return pytest.mark.parametrize("_config_overrides", dicts, ids=ids)(
            _wrap(fn, sig))
    return decorator


def parametrize_config(**config_options: Any) -> Callable:
    """pytest helper: run the test under every combination of the given values, each
    inside :func:`configured`."""
    import itertools
    if not config_options:
        raise ValueError("parametrize_config requires at least one config option")
    keys = list(config_options)
    return _parametrize(list(itertools.product(*(list(config_options[k]) for k in keys))),
                        keys)


def parametrize_config_pointwise(**config_options: Any) -> Callable:
    """pytest helper: like :func:`parametrize_config`, the value lists taken in
    lockstep (all of one length)."""
    if not config_options:
        raise ValueError("parametrize_config_pointwise requires at least one config "
                         "option")
    keys = list(config_options)
    lists = [list(config_options[k]) for k in keys]
    if len({len(v) for v in lists}) != 1:
        raise ValueError("parametrize_config_pointwise requires every option to have the "
                         "same number of values; got lengths "
                         f"{dict(zip(keys, map(len, lists)))}")
    return _parametrize(list(zip(*lists)), keys)
