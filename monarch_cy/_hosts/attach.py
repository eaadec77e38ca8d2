"""``attach_to_workers`` (and Monarch's ``attach``) and the remote hosts behind a
``HostMesh``.

``attach_to_workers(workers=["tcp://node0:26600", ...])`` returns at once a
``HostMesh`` with one dimension, ``hosts``, whose agents (see :mod:`.agent`) are
being connected in parallel; ``hm.initialized`` is a Future resolving to True when
all answered (or raising the first failure).  ``hm.spawn_procs(per_host=...)``
waits for the hosts it needs, then asks every agent at once to start its procs and
returns a ``ProcMesh`` whose first dimension is ``hosts``.

The controller's own actor runtime must be reachable from those hosts: the first
use of remote hosts starts it on TCP, bound to :func:`controller_ip` (this
machine's address on the route to the first worker that is not on loopback, unless
``MONARCH_CY_HOST`` or ``MONARCH_CY_CONTROLLER_INTERFACE`` says otherwise), on
ports from ``MONARCH_CY_CONTROLLER_PORTS`` when set.  When every worker is on this
machine (``ipc://``, or an agent on loopback), the runtime may run anywhere this
machine reaches: on loopback, or on the ``unix://`` addresses local procs started it
on.  If it already started on addresses a worker cannot reach (local-only ones for a
worker elsewhere), a ``RuntimeError`` says so.

The secret the agents hold (``secret=``, else :func:`.secret.default_secret`: the
job secret of the environment, else this user's) authenticates the link to each of
them only; the procs they start get this controller's own job secret.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading

from monarch_cy import _config
from monarch_cy._checks import check_timeout
from monarch_cy._hosts import protocol as P
from monarch_cy._errors import HostUnreachableError

__all__ = ["attach_to_workers", "attach", "attached_via", "HostSet",
           "ensure_controller_node", "get_hub", "attach_timeout", "controller_ip",
           "configured_ip"]

_hub = None
_hub_lock = threading.Lock()


def attach_timeout() -> float:
    """``MONARCH_CY_ATTACH_TIMEOUT`` (seconds, default 30; :mod:`monarch_cy._config`)."""
    return _config.attach_timeout()


class HostSet:
    """The remote hosts of a host mesh, by global host rank."""

    def __init__(self, hosts: list) -> None:
        self.hosts = hosts
        # names this set in host meshes pickled anywhere in the job
        # (monarch_cy._actor.meshes.host_refs)
        self.uid = os.urandom(8).hex()

    def resolve(self, ranks) -> list:
        """The hosts at ``ranks``, once up; raises the failure of one that is not."""
        out = []
        for r in ranks:
            h = self.hosts[r]
            import time
            h.ready.wait(max(0.0, h.deadline - time.monotonic()) + 5.0)
            if h.state != "up":
                raise h.error or HostUnreachableError(f"{h.name} is not up ({h.state})")
            out.append(h)
        return out

    def __len__(self) -> int:
        return len(self.hosts)

    def shut_down(self) -> None:
        """Tell every agent of this set that is up to kill its procs and exit
        (``HostMesh.shutdown()``); returns at once.  Their departure is no loss."""
        by_hub = {}
        for h in self.hosts:
            by_hub.setdefault(id(h.hub), (h.hub, []))[1].append(h)
        for hub, hosts in by_hub.values():
            def send(hub=hub, hosts=hosts):
                for h in hosts:
                    if h.state == "up":
                        hub.send(h, (P.SHUTDOWN,))
                        h.state = "closed"
            hub.command(send)


def _shutdown() -> None:
    # Registered before the controller's node exists, so it runs after the node's
    # own shutdown; stop_all again in case the node was made elsewhere (idempotent).
    global _hub
    hub = _hub
    if hub is None:
        return
    try:
        from monarch_cy._transport.node import current_node
        if current_node() is not None:
            from monarch_cy._actor.meshes.proc_stop import stop_all
            stop_all(grace=2.0)
    except Exception:
        pass
    hub.close()
    _hub = None
    for fn in reversed(_finalizers):
        try:
            fn()
        except Exception:
            pass


_finalizers = []
_registered = False
_registered_lock = threading.Lock()


def at_shutdown(fn) -> None:
    """Run ``fn()`` after the hub said goodbye to every agent (at exit)."""
    _finalizers.append(fn)


def configured_ip() -> str | None:
    """The address the user chose for the controller: ``MONARCH_CY_HOST``, else the
    IPv4 address of ``MONARCH_CY_CONTROLLER_INTERFACE``, else None.  ``ValueError``
    when both are set, for a wildcard address, or for an interface that does not exist
    or has no IPv4 address."""
    host, iface = _config.host(), _config.controller_interface()
    if host and iface:
        raise ValueError(f"MONARCH_CY_HOST={host!r} and MONARCH_CY_CONTROLLER_INTERFACE="
                         f"{iface!r} are both set; set only one")
    if host in ("0.0.0.0", "::", "*"):
        raise ValueError(f"MONARCH_CY_HOST={host!r} is a wildcard; give the address of "
                         "this machine that the other hosts reach")
    if iface:
        return P.interface_ip(iface, "MONARCH_CY_CONTROLLER_INTERFACE")
    return host


def controller_ip(toward: str | None) -> str:
    """The address the controller binds for remote hosts: :func:`configured_ip`, else
    this machine's address on the route to ``toward`` (a host name or address), else
    the address of this machine's host name."""
    return configured_ip() or (P.local_ip_towards(toward) if toward else
                               socket.gethostbyname(socket.gethostname()))


def ensure_controller_node(toward: str | None, secret: bytes | None,
                           host: str | None = None):
    """The controller's node, started on TCP at ``host`` (default
    :func:`controller_ip` of ``toward``).  ``RuntimeError`` when it already runs
    somewhere ``toward`` cannot reach: on local-only addresses (``unix://``,
    ``ipc://``, loopback) while ``toward`` (None: any remote host) is not on loopback.
    ``secret``: the node's job secret must be this one (dialing agents hold it)."""
    global _registered
    # Import asyncio before the runtime's threads start: Future.get() reads it from
    # sys.modules and must never see it half-imported by another thread.
    import asyncio  # noqa: F401
    from monarch_cy._actor.wiring import make_controller_node
    from monarch_cy._transport.current import node_or_make
    with _registered_lock:
        if not _registered:
            _registered = True
            atexit.register(_shutdown)
    node = node_or_make(lambda: make_controller_node(
        host=host or controller_ip(toward), secret=secret))
    local_ok = toward is not None and P.is_loopback(toward)
    if (not node.addr.startswith("tcp://") and not local_ok) or (
            node.addr.startswith("tcp://") and
            P.is_loopback(P.parse_tcp(node.addr)[0]) and not local_ok):
        raise RuntimeError(
            f"this controller's actor runtime already runs on local-only addresses "
            f"({node.addr}), which "
            + (f"{toward}" if toward else "other hosts") + " cannot reach; use remote "
            "hosts before anything else starts the runtime (local procs, this_proc(), "
            "an attach to 127.0.0.1), or set MONARCH_CY_HOST / "
            "MONARCH_CY_CONTROLLER_INTERFACE to this machine's address first")
    if secret is not None and node.keys.secret != secret:
        raise ValueError("this controller's actor runtime already runs with another "
                         "job secret than the one given for the agents")
    return node


def get_hub(node):
    global _hub
    with _hub_lock:
        if _hub is None:
            from monarch_cy._hosts.link import Hub
            _hub = Hub(node)
        return _hub


def attach_to_workers(*, workers, name: str | None = None, ca=None, private_key=None,
                      secret: bytes | None = None, timeout: float | None = None):
    """A ``HostMesh`` (dimension ``hosts``) over agents listening at ``workers``.

    ``workers``: one address per host (strings or futures of them), in the forms of
    :mod:`.worker_address` (``tcp://HOST:PORT``, an alias, ``ipc:///PATH``).
    ``secret``: the secret the agents hold (default: ``MONARCH_CY_JOB_SECRET_FILE`` /
    ``MONARCH_CY_JOB_SECRET``, else this user's secret, as a worker loop started
    with neither does); it authenticates the link to each agent only: the procs they
    start get this controller's job secret.  ``timeout``: seconds each agent has to
    answer (default Monarch's ``mesh_attach_config_timeout`` when configured, else
    ``MONARCH_CY_ATTACH_TIMEOUT`` or 30).  ``ca``/``private_key`` are Monarch's TLS
    arguments; monarch_cy authenticates with the secret instead, so only their
    defaults are accepted.  Returns at once; ``.initialized`` is a Future of True
    (or the first host's failure, which names its address).
    """
    from monarch_cy._actor.base.future import Future
    from monarch_cy._hosts.worker_address import dial_endpoint, is_local_endpoint
    from monarch_cy._transport.auth import JobKeys
    from monarch_cy._transport.secret import default_secret
    if ca not in (None, "trust_all_connections") or private_key is not None:
        raise ValueError("monarch_cy authenticates hosts with the job secret "
                         "(secret=, MONARCH_CY_JOB_SECRET_FILE); ca and private_key are "
                         f"not supported (got ca={ca!r})")
    if isinstance(workers, (str, bytes)) or not hasattr(workers, "__iter__"):
        raise TypeError(f"workers must be a list of 'tcp://host:port' strings, not "
                        f"{workers!r}")
    addrs = []
    for w in workers:
        if isinstance(w, Future):
            w = w.get()
        addrs.append(dial_endpoint(w))
    if not addrs:
        raise ValueError("workers is empty; give at least one 'tcp://host:port'")
    dup = sorted({a for a in addrs if addrs.count(a) > 1})
    if dup:
        raise ValueError(f"workers lists {dup!r} more than once")
    if timeout is None:
        timeout = _attach_config_timeout() or attach_timeout()
    else:
        timeout = check_timeout("timeout", timeout)
    keys = JobKeys(secret if secret is not None else default_secret())
    # bind toward a worker that is not on this machine; only when all are, a local
    # runtime is enough (every agent here: procs reach the controller here too)
    remote = [P.parse_tcp(a)[0] for a in addrs if not is_local_endpoint(a)]
    toward = remote[0] if remote else "127.0.0.1"
    node = ensure_controller_node(toward, None)
    hub = get_hub(node)
    hosts = [hub.connect(a, timeout, keys) for a in addrs]
    for a, h in zip(addrs, hosts):
        if a == _attached_via:        # the client attached through it: linked before
            h.ready.wait(timeout + 5.0)   # anything else goes on (Monarch's bootstrap)
    return host_mesh(hosts)


_attached_via = None


def attach(addr: str) -> None:
    """Monarch's ``attach(addr)``: bootstrap this client through a worker's address,
    before the client's runtime starts.

    Monarch then sends all client traffic through that worker's gateway.  monarch_cy
    has no gateway: its controller dials every agent itself and procs reply to it
    directly, so it must be reachable from them (as without ``attach``); an
    ``attach_to_workers`` that names this address returns only once the link to that
    worker is up (the client is then bootstrapped through it, and later changes at
    that address, the socket file removed, change nothing).  ``attach`` keeps Monarch's
    contract otherwise: ``addr`` must be a worker address
    (:mod:`.worker_address`; ``ValueError`` naming it), repeating the same address is
    a no-op, and ``RuntimeError`` once the client's runtime started without it or
    was attached through another address."""
    from monarch_cy._hosts.worker_address import dial_endpoint
    from monarch_cy._transport.current import current_node
    global _attached_via
    dial = dial_endpoint(addr, "attach address")
    with _hub_lock:
        if _attached_via == dial:
            return
        if _attached_via is not None:
            raise RuntimeError(f"client is already attached through {_attached_via}, "
                               f"not {dial}; detaching is not supported, so use a new "
                               "process to attach through a different address")
        if current_node() is not None:
            raise RuntimeError("client was initialized without a remote attachment; "
                               "call attach(addr) before the first context()/"
                               "this_host()/this_proc()")
        _attached_via = dial


def attached_via() -> str | None:
    """The address :func:`attach` recorded (None: none)."""
    return _attached_via


def _attach_config_timeout() -> float | None:
    """Monarch's ``mesh_attach_config_timeout`` when set with ``configure`` (seconds)."""
    from monarch_cy import _config_api  # deferred: only an attach reads it
    v = _config_api.get_runtime_config().get("mesh_attach_config_timeout")
    return None if v is None else _config_api.parse_duration(v)


def host_mesh(hosts: list):
    """A ``HostMesh`` over ``hosts`` with ``.initialized``."""
    from monarch_cy._actor.base.future import Future
    from monarch_cy._actor.meshes.host_mesh import HostMesh
    from monarch_cy._actor.base.shape import Shape
    hs = HostSet(list(hosts))
    hm = HostMesh(Shape.dense(("hosts",), (len(hosts),)), hs)
    fut = Future._make(None)

    def watch():
        try:
            hs.resolve(range(len(hosts)))
        except Exception as e:
            fut._set_exception(e)
        else:
            fut._set_result(True)
    threading.Thread(target=watch, daemon=True, name="monarch_cy-attach").start()
    hm._record.ready = fut
    return hm
