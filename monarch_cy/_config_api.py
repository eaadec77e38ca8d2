"""Monarch's runtime configuration API (``monarch.config``) over :mod:`monarch_cy._config`.

``configure(**kw)`` takes Monarch's keys (the 84 of torchmonarch 0.7.0, with its
types and defaults) and records them in this process's *runtime layer*.  A key
with a monarch_cy equivalent also sets that ``MONARCH_CY_*`` variable's runtime
override (:func:`monarch_cy._config.set_override`), so what the package reads
changes; :data:`MAPPED` lists those keys.  Every other key is checked and recorded
(``get_runtime_config``/``get_global_config`` return it) and has no effect here.

As in Monarch, a proc starts with the configuration of the process that spawned it,
as it was at ``spawn_procs`` (:func:`child_environment`): both the keys and the
``MONARCH_CY_*`` variables they set; a later ``configure`` in the spawner does not
reach procs already started.  Other processes (``subprocess``...) inherit only the
environment.

Errors: an unknown key is a ``ValueError`` naming it and listing the known keys; a
value of the wrong type or out of range is a :class:`ConfigValueError` (both a
``TypeError``, as Monarch raises, and a ``ValueError``) naming the key and the
value.  ``configure`` checks every value before it applies any.

Durations are humantime strings (``"30s"``, ``"1m 30s"``, ``"500ms"``, ``"1h30m"``,
``"1.5s"``); the runtime layer keeps them normalized as Monarch does
(``"1h30m"`` -> ``"1h 30m"``, ``"1.5s"`` -> ``"1s 500ms"``; :mod:`._config_durations`),
and a malformed one is refused with Monarch's ``Invalid duration format`` text.
``default_transport`` is kept as a :class:`~._config_transport.BindSpec` whatever
form it was given in (``ChannelTransport``, ``"tcp"``, ``"tcp://127.0.0.1:8080"``).

Imports only the standard library and the ``monarch_cy._config*`` modules.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import json
from typing import Any, Dict, Iterator

from monarch_cy import _config
from monarch_cy._config_durations import format_duration, parse_duration
from monarch_cy._config_transport import BindSpec, ChannelTransport
from monarch_cy._errors import ConfigValueError

__all__ = ["BindSpec", "ChannelTransport", "ConfigValueError", "Encoding", "KEYS", "MAPPED",
           "clear_runtime_config", "configure", "configured", "get_global_config",
           "get_runtime_config", "parse_duration", "format_duration", "child_environment"]


class Encoding(enum.Enum):
    """Monarch's message encodings (``default_encoding``); recorded only: monarch_cy
    always encodes with cloudpickle plus out-of-band buffers."""

    Bincode = "bincode"
    Json = "json"
    Multipart = "multipart"


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
        except ValueError as e:                  # "Invalid duration format ...", Monarch's
            raise _bad(key.name, v, str(e)) from None
    if k == "encoding":
        if not isinstance(v, Encoding):
            raise _bad(key.name, v, "expected an Encoding (Encoding.Bincode, .Json or "
                       ".Multipart)")
        return v
    # transport: kept as the BindSpec it names, whatever form it was given in
    if not isinstance(v, (ChannelTransport, BindSpec, str)):
        raise _bad(key.name, v, "expected ChannelTransport enum, BindSpec, or str")
    try:
        return BindSpec(v)
    except ValueError as e:
        raise _bad(key.name, v, str(e)) from None


# -- the keys monarch_cy honours -------------------------------------------------------

_RAW_TRANSPORT = {ChannelTransport.Unix: "unix", ChannelTransport.TcpWithLocalhost: "tcp",
                  ChannelTransport.TcpWithHostname: "tcp"}


def _transport_raw(v) -> str | None:
    """The ``MONARCH_CY_TRANSPORT`` value a transport means, or None when it has none
    here; ``v`` a BindSpec, a ChannelTransport or a str (``enable_transport``'s)."""
    if isinstance(v, ChannelTransport):
        return _RAW_TRANSPORT.get(v)
    if isinstance(v, BindSpec):
        if v.transport is not None:
            return _RAW_TRANSPORT.get(v.transport)
        return v.address.partition(":")[0] if v.address.startswith(("unix:", "tcp:")) \
            else None
    s = v.strip().lower()
    if s == "unix" or s.startswith(("unix://", "ipc://")):
        return "unix"
    if s == "tcp" or s.startswith("tcp://"):
        return "tcp"
    return None


def _transport_back(v: str) -> BindSpec:
    return BindSpec(ChannelTransport.TcpWithLocalhost if v == "tcp"
                    else ChannelTransport.Unix)


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
        "MONARCH_CY_CLEANUP_TIMEOUT", _secs_raw, format_duration,
        "How long an actor's `__cleanup__` may run before counting as hung; read in "
        "the actor's process (procs spawned after `configure` start with it)."),
    "codec_max_frame_length": (
        "MONARCH_CY_MAX_MESSAGE_BYTES", str, int,
        "The largest message a process sends, its pickle and buffers together: a call "
        "whose arguments are larger fails with Monarch's `SupervisionError` (`rejecting "
        "oversize frame: len=... > max=...`) and is not sent; a larger result reaches "
        "the caller as an error."),
    "rdma_ibverbs_target": (
        "MONARCH_CY_RDMA_IBVERBS_TARGET", str, lambda v: v or "",
        "`nic:<name>` opens that verbs device; `cpu:<numa>` / `gpu:<ordinal>` leave the "
        "choice automatic; a malformed value makes `RDMABuffer(...)` and "
        "`RDMAAction.submit()` raise `RdmaInitError` naming it, as Monarch's."),
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


# -- a proc starts with its spawner's configuration ---------------------------------

_INHERITED = "MONARCH_CY_MONARCH_CONFIG"


def _to_json(v: Any) -> Any:
    if isinstance(v, Encoding):
        return {"encoding": v.name}
    if isinstance(v, BindSpec):
        src = v.transport
        return {"transport": src.name} if src is not None else {"bind": v._source}
    return v


def _from_json(v: Any) -> Any:
    if isinstance(v, dict):
        if "encoding" in v:
            return Encoding[v["encoding"]]
        if "transport" in v:
            return ChannelTransport[v["transport"]]
        return v["bind"]
    return v


def child_environment() -> Dict[str, str]:
    """The variables a proc started now gets so that it starts with this process's
    configuration, as Monarch's procs start with their spawner's: every
    ``MONARCH_CY_*`` runtime override in effect, and (``MONARCH_CY_MONARCH_CONFIG``,
    JSON) the keys :func:`configure` set.  Empty when nothing was configured.
    ``spawn_procs`` puts them under its own ``env=``."""
    with _lock:
        runtime = {k: _to_json(v) for k, v in _runtime.items()}
    env = dict(_config.overrides())
    if runtime:
        env[_INHERITED] = json.dumps(runtime, sort_keys=True)
    return env


def _inherit() -> None:
    """At import in a proc: take the keys its spawner had set (the ``MONARCH_CY_*``
    variables came in the environment already).  A key this version does not know,
    or a value it refuses, is left out: the proc keeps its default for it."""
    raw = _config.monarch_config()
    if not raw:
        return
    try:
        given = json.loads(raw)
    except ValueError:
        return
    if not isinstance(given, dict):
        return
    for name, value in given.items():
        key = KEYS.get(name)
        if key is None:
            continue
        try:
            _runtime[name] = _check(key, _from_json(value))
        except (ValueError, TypeError, KeyError):
            continue


_inherit()


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
