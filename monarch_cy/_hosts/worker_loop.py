"""Worker loops: make this process a host that a controller attaches to with
``attach_to_workers`` (Monarch's ``run_worker_loop_forever``,
``run_worker_loop_until_shutdown`` and ``start_worker_loop_forever``).

Start one per host, by hand or from a scheduler's script, then attach::

    # on each host (the job secret in MONARCH_CY_JOB_SECRET[_FILE], as for agents)
    run_worker_loop_forever(address="tcp://node0:26600", ca="trust_all_connections")
    # on the controller
    hosts = attach_to_workers(workers=["tcp://node0:26600", ...],
                              ca="trust_all_connections")

The loop is the monarch_cy host agent (:mod:`.agent`) run inside this process: it
listens on ``address``, starts and supervises procs for the controllers that
attach, and kills a controller's procs when that controller says goodbye or is
lost.  Monarch's arguments:

* ``address``: ``tcp://HOST:PORT`` (HOST: this host's address as the controller
  dials it; the loop listens there and the procs bind it).  Monarch's alias form
  ``tcp://ADVERTISED:PORT@tcp://BIND:PORT`` listens on ``BIND`` (e.g. ``0.0.0.0``)
  and advertises ``ADVERTISED``; a Monarch proc id prefix (``service<...>@``) is
  accepted and ignored.  A wildcard host (``tcp://*:PORT``) raises
  ``NotImplementedError`` as in Monarch; another scheme (``ipc://``,
  ``metatls://``) raises ``ValueError`` naming it.
* ``ca`` (required, keyword) and ``private_key``: Monarch's TLS arguments.  Only
  ``ca="trust_all_connections"`` and ``private_key=None`` are accepted, as in
  Monarch 0.7.0 (``NotImplementedError`` otherwise); monarch_cy authenticates
  controllers with the job secret instead (``secret=``, else
  ``MONARCH_CY_JOB_SECRET_FILE`` / ``MONARCH_CY_JOB_SECRET``).
* monarch_cy's own ``ports=(first, last)``: the ports the procs bind (default
  26601-27600, as for agents); give each worker loop on one machine its own range.

``run_worker_loop_forever`` serves controller after controller and returns only
when the process is signalled (``SIGTERM``/``SIGINT``: its procs are killed, then
``SystemExit``).  ``run_worker_loop_until_shutdown`` returns (None) once the first
controller that attached is gone (its ``HostMesh``'s controller said goodbye at
its end, or was lost), its procs stopped.  ``start_worker_loop_forever`` runs the
forever loop in a background thread and returns at once a ``Future[None]`` that
fails if the loop fails (an address in use, say); call ``get()`` to block on it.
"""

from __future__ import annotations

import threading

from monarch_cy._hosts.worker_address import listen_spec

__all__ = ["run_worker_loop_forever", "run_worker_loop_until_shutdown",
           "start_worker_loop_forever", "parse_worker_address"]

def parse_worker_address(address) -> tuple[str, str | None]:
    """``(listen, advertise)`` for a worker-loop ``address`` without an inherited fd
    (see :mod:`.worker_address`, which also takes ``tcp://HOST:fdN``)."""
    spec = listen_spec(address)
    if spec.fd is not None:
        raise ValueError(f"address {address!r} names an inherited socket; use "
                         "worker_address.listen_spec")
    return spec.bind, spec.advertise


def _check_tls(private_key, ca) -> None:
    if private_key is not None or ca != "trust_all_connections":
        raise NotImplementedError(
            "TLS (ca=, private_key=) is not supported: pass ca='trust_all_connections'; "
            "monarch_cy authenticates controllers with the job secret "
            "(MONARCH_CY_JOB_SECRET_FILE / MONARCH_CY_JOB_SECRET)")


def _make_agent(address, private_key, ca, secret, once: bool, ports):
    _check_tls(private_key, ca)
    spec = listen_spec(address)
    from monarch_cy._hosts import protocol as P
    from monarch_cy._hosts.agent import Agent
    from monarch_cy._transport.secret import default_secret
    if ports is None:
        ports = P.DEFAULT_PROC_PORTS
    elif (not isinstance(ports, tuple) or len(ports) != 2 or
          not all(isinstance(p, int) for p in ports) or not 0 < ports[0] <= ports[1] < 65536):
        raise ValueError(f"ports must be a (first, last) tuple of ports, not {ports!r}")
    return Agent(secret if secret is not None else default_secret(), listen=spec.bind,
                 listen_fd=spec.fd, advertise=spec.advertise, once=once, ports=ports)


def _run(agent) -> None:
    import signal
    main = threading.current_thread() is threading.main_thread()
    old = {}
    if main:
        def on_signal(signum, frame):
            raise SystemExit(128 + signum)
        for s in (signal.SIGTERM, signal.SIGINT):
            old[s] = signal.signal(s, on_signal)
    try:
        code = agent.run()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        agent.close()
    if code:
        raise RuntimeError(f"the worker loop ended with status {code}")


def run_worker_loop_forever(*, private_key=None, ca, address: str,
                            secret: bytes | None = None, ports=None) -> None:
    """Serve controllers on ``address`` until this process is signalled."""
    _run(_make_agent(address, private_key, ca, secret, False, ports))


def run_worker_loop_until_shutdown(*, private_key=None, ca, address: str,
                                   secret: bytes | None = None, ports=None) -> None:
    """Serve the first controller that attaches; return once it is gone."""
    _run(_make_agent(address, private_key, ca, secret, True, ports))


def start_worker_loop_forever(*, private_key=None, ca, address: str,
                              secret: bytes | None = None, ports=None):
    """Start the forever loop in a background thread; a ``Future[None]`` of it."""
    from monarch_cy._actor.base.future import Future
    agent = _make_agent(address, private_key, ca, secret, False, ports)
    fut = Future._make(None)

    def loop():
        try:
            code = agent.run()
        except BaseException as e:              # noqa: B036 - reported, not lost
            agent.close()
            fut._set_exception(e)
            return
        agent.close()
        if code:
            fut._set_exception(RuntimeError(f"the worker loop ended with status {code}"))
        else:
            fut._set_result(None)
    threading.Thread(target=loop, daemon=True, name="monarch_cy-worker-loop").start()
    return fut
