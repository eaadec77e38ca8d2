"""monarch.config values as programs read them: defaults, durations (normal form and
the invalid-format error), default_transport as a BindSpec, and a proc starting with
the configuration its spawner had at spawn_procs."""

from _obs import obs, step  # noqa: E402

from monarch._rust_bindings.monarch_hyperactor.channel import (  # noqa: E402
    BindSpec, ChannelTransport)
from monarch.actor import Actor, endpoint, this_host  # noqa: E402
from monarch.config import configured, get_global_config  # noqa: E402

KEYS = ["cleanup_timeout", "host_spawn_ready_timeout", "message_delivery_timeout",
        "stop_actor_timeout", "codec_max_frame_length", "rdma_ibverbs_target",
        "tail_log_lines", "enable_log_forwarding"]

g = get_global_config()
obs("defaults", {k: g[k] for k in KEYS})
obs("default_transport_is_unix", g["default_transport"] == BindSpec(ChannelTransport.Unix))


def normal(text):
    with configured(host_spawn_ready_timeout=text) as c:
        return c["host_spawn_ready_timeout"]


obs("durations", [normal(t) for t in ("30s", "90s", "1h30m", "1h 30m", "500ms", "2h")])


def refused(kind, **kw):
    """Whether the value is refused with ``kind`` (what Monarch's tests catch: a
    TypeError for a bad type or a bad duration, a ValueError for a bad transport
    string; monarch_cy's ConfigValueError is both), and whether the text says
    "Invalid duration format"."""
    try:
        with configured(**kw):
            return "accepted"
    except Exception as e:  # noqa: BLE001 - the observation
        return {"raised_" + kind.__name__: isinstance(e, kind),
                "invalid_duration_format": "Invalid duration format" in str(e)}


obs("bad_durations", [refused(TypeError, host_spawn_ready_timeout=v)
                      for v in ("invalid", "30", "abc123")]
    + [refused(TypeError, message_delivery_timeout=30)])
obs("bad_transports", [refused(TypeError, default_transport=v) for v in (42, {})]
    + [refused(ValueError, default_transport=v) for v in ("random_string", "invalid://s")])
with configured(default_transport="tcp") as c:
    obs("tcp_is_tcp_with_hostname",
        c["default_transport"] == BindSpec(ChannelTransport.TcpWithHostname))
with configured(default_transport="tcp://127.0.0.1:8080") as c:
    obs("explicit_address", c["default_transport"] == BindSpec("tcp://127.0.0.1:8080"))
obs("bindspec_text", [str(BindSpec(s)) for s in (
    ChannelTransport.Unix, ChannelTransport.TcpWithLocalhost, "tcp", "tls",
    "tcp://127.0.0.1:8080", "ipc:///tmp/x", "ipc://@abc", "metatls://h:1")])
obs("bindspec_equality", [BindSpec("unix") == BindSpec(ChannelTransport.Unix),
                          BindSpec("tcp") == BindSpec(ChannelTransport.TcpWithLocalhost),
                          BindSpec(BindSpec("tls")) == BindSpec("tls")])


class Reader(Actor):
    @endpoint
    def read(self, keys):
        c = get_global_config()
        return [c[k] for k in keys]


PROP = ["rdma_ibverbs_target", "tail_log_lines", "cleanup_timeout", "message_delivery_timeout"]
with configured(rdma_ibverbs_target="nic:mlx5_0", tail_log_lines=7, cleanup_timeout="9s",
                message_delivery_timeout="90s"):
    pm = this_host().spawn_procs()
    r = pm.spawn("reader", Reader)
    step("in_proc_while_configured", lambda: r.read.call_one(PROP).get(timeout=60))
step("same_proc_after", lambda: r.read.call_one(PROP).get(timeout=60))
pm2 = this_host().spawn_procs()
step("new_proc_after", lambda: pm2.spawn("reader", Reader).read.call_one(PROP).get(timeout=60))
obs("client_after", [get_global_config()[k] for k in PROP])
pm.stop().get(timeout=60)
pm2.stop().get(timeout=60)
