"""``enable_transport`` and ``ChannelTransport`` (Monarch's), over MONARCH_CY_TRANSPORT."""

from __future__ import annotations

import subprocess
import sys

import pytest

from monarch_cy import _config
from monarch_cy.actor import ChannelTransport, enable_transport


def _run(code: str) -> str:
    env = {k: v for k, v in __import__("os").environ.items() if k != "MONARCH_CY_TRANSPORT"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env, timeout=60).stdout.strip()


def test_before_the_runtime_starts():
    out = _run(
        "from monarch_cy import _config, _config_api\n"
        "from monarch_cy.actor import enable_transport, ChannelTransport as C\n"
        "enable_transport('tcp'); print(_config.transport(), "
        "_config_api.get_runtime_config()['default_transport'])\n"
        "enable_transport(C.TcpWithLocalhost)\n"            # the same one again: fine
        "try:\n    enable_transport(C.Unix)\nexcept RuntimeError as e:\n"
        "    print('one:', 'Only one transport type' in str(e))\n"
        "from monarch_cy.actor import this_proc, Actor, endpoint\n"
        "class A(Actor):\n    @endpoint\n    def f(self):\n        return 3\n"
        "print(this_proc().spawn('a', A).f.call_one().get(10))\n"
        "enable_transport('tcp://127.0.0.1:1')\n"          # the one in use: a no-op
        "try:\n    enable_transport('ipc')\nexcept RuntimeError as e:\n"
        "    print('late:', 'must be called before any other calls' in str(e))\n")
    assert out.split("\n") == ["tcp tcp(Hostname)", "one: True", "3",   # a BindSpec, as Monarch's
                               "late: True"]


def test_ipc_is_unix():
    out = _run("from monarch_cy import _config\nfrom monarch_cy.actor import "
               "enable_transport\nenable_transport('ipc'); print(_config.transport())")
    assert out == "unix"


def test_unsupported_and_bad_values():
    for t in (ChannelTransport.Tls, ChannelTransport.MetaTlsWithHostname, "metatls",
              "local", "quic://x:1", "carrier-pigeon"):
        with pytest.raises(ValueError, match="not supported by monarch_cy"):
            enable_transport(t)
    with pytest.raises(TypeError):
        enable_transport(5)


def test_after_the_start_only_the_transport_in_use(procs):
    in_use = _config.transport()
    if in_use == "ipc":
        pytest.skip("zmq over ipc:// has no Monarch name")
    other = ChannelTransport.TcpWithHostname if in_use == "unix" else ChannelTransport.Unix
    with pytest.raises(RuntimeError, match="must be called before any other calls"):
        enable_transport(other)
    same = ChannelTransport.Unix if in_use == "unix" else ChannelTransport.TcpWithLocalhost
    assert enable_transport(same) is None
