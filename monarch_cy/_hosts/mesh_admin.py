"""A mesh admin: a read-only HTTP endpoint that describes host meshes (Monarch's
private ``monarch._src.actor.host_mesh._spawn_admin``).

``spawn_admin(host_meshes, admin_addr=None, telemetry_url=None)`` returns at once a
``Future[(admin_url, admin_ref)]``: an HTTP server in this process, bound to
``admin_addr`` (``"HOST:PORT"``, ``"[::]:0"`` for any port), else to Monarch's
``mesh_admin_addr`` configuration key (``monarch.config.configure(mesh_admin_addr=
...)``, default ``[::]:1729``), serving ``GET /`` as JSON: for each host mesh its
sizes and, for remote hosts, each host's agent address, hostname, address and pid,
plus ``telemetry_url``.  ``admin_url`` is ``http://<this host's name>:<port>`` (also
put in ``$MONARCH_ADMIN_URL``, as Monarch does); ``admin_ref.stop()`` closes the
server (the process's exit does too).  ``ValueError`` for no host mesh or a malformed
address, naming it; the Future fails when the address cannot be bound.
"""

from __future__ import annotations

import json
import os
import socket
import threading

__all__ = ["spawn_admin", "AdminRef"]


class AdminRef:
    """The running admin: its ``url``; ``stop()`` closes it (idempotent)."""

    def __init__(self, server, url: str) -> None:
        self._server, self.url = server, url

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __repr__(self) -> str:
        return f"<mesh admin {self.url}>"


def _parse(addr: str) -> tuple[str, int]:
    host, sep, port = str(addr).rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"mesh admin address {addr!r} must look like 'HOST:PORT' or "
                         "'[::]:PORT' (port 0: any free port)")
    return host, int(port)


def _describe(host_meshes, telemetry_url) -> dict:
    meshes = []
    for hm in host_meshes:
        hosts = []
        for h in getattr(getattr(hm, "_hosts", None), "hosts", None) or ():
            info = h.info or {}
            hosts.append({"endpoint": h.endpoint, "state": h.state,
                          "hostname": info.get("hostname"), "ip": info.get("ip"),
                          "pid": info.get("pid")})
        meshes.append({"sizes": dict(hm.sizes), "hosts": hosts or "this host"})
    return {"host_meshes": meshes, "telemetry_url": telemetry_url}


def spawn_admin(host_meshes, admin_addr: str | None = None,
                telemetry_url: str | None = None):
    """Start the admin (module docstring); a Future of ``(admin_url, admin_ref)``."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from monarch_cy._actor.base.future import Future
    meshes = list(host_meshes or ())
    if not meshes:
        raise ValueError("_spawn_admin requires at least one HostMesh")
    if admin_addr is None:
        from monarch_cy._config_api import get_global_config  # deferred: only here
        admin_addr = get_global_config()["mesh_admin_addr"]
    host, port = _parse(admin_addr)
    fut = Future._make(None)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(_describe(meshes, telemetry_url)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):    # no line per request on stderr
            pass

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True

    try:
        server = Server((host, port), Handler)
    except OSError as e:
        fut._set_exception(OSError(e.errno, f"cannot start the mesh admin on "
                                            f"{admin_addr}: {e.strerror}"))
        return fut
    threading.Thread(target=server.serve_forever, daemon=True,
                     name="monarch_cy-mesh-admin").start()
    url = f"http://{socket.gethostname()}:{server.server_address[1]}"
    os.environ["MONARCH_ADMIN_URL"] = url
    fut._set_result((url, AdminRef(server, url)))
    return fut
