"""Worker addresses (monarch_cy._hosts.worker_address): Monarch's forms, what a worker
listens on and what a controller dials, and the errors for the rest (they name the
value and list the forms)."""

from __future__ import annotations

import pytest


def test_worker_address_forms_listen_and_dial():
    from monarch_cy._hosts.worker_address import (Listen, dial_endpoint,
                                                  is_local_endpoint, listen_spec)
    assert listen_spec("ipc:///tmp/w/0") == Listen(bind="ipc:///tmp/w/0")
    assert listen_spec("tcp://127.0.0.1:fd7") == Listen(bind="tcp://127.0.0.1", fd=7)
    assert listen_spec("tcp://w0:4444@tcp://0.0.0.0:4444") == Listen(
        bind="tcp://0.0.0.0:4444", advertise="w0")
    # a controller dials an alias at its advertised half, anything else as given
    assert dial_endpoint("tcp://127.0.0.1:5@tcp://0.0.0.0:5") == "tcp://127.0.0.1:5"
    assert dial_endpoint("ipc:///tmp/w/0") == "ipc:///tmp/w/0"
    assert is_local_endpoint("ipc:///tmp/w/0") and is_local_endpoint("tcp://127.0.0.1:5")
    assert not is_local_endpoint("tcp://10.1.2.3:5")
    with pytest.raises(ValueError, match="dial its real port"):
        dial_endpoint("tcp://127.0.0.1:fd7")
    for bad, why in (("udp://h:1", "unsupported ZMQ scheme: udp"), ("h:1", "no scheme"),
                     ("ipc://", "needs a path"), ("tcp://h:0", "port in 1..65535")):
        with pytest.raises(ValueError, match=f'"{bad}": .*{why}') as ei:
            dial_endpoint(bad)
        assert "ipc:///PATH" in str(ei.value)       # the forms it takes are listed
    with pytest.raises(TypeError, match="must be a str"):
        listen_spec(5)


def test_attach_to_workers_refuses_an_unknown_scheme_before_anything_starts():
    from monarch_cy._hosts.attach import attach_to_workers
    with pytest.raises(ValueError, match='"metatls://w0:1": unsupported ZMQ scheme'):
        attach_to_workers(workers=["metatls://w0:1"], ca="trust_all_connections")
    with pytest.raises(ValueError, match="more than once"):
        attach_to_workers(workers=["ipc:///tmp/x", "ipc:///tmp/x"])
