"""monarch_cy._config_transport: Monarch's BindSpec -- the forms it takes, equality,
its text, and what it refuses."""

from __future__ import annotations

import pickle

import pytest

from monarch_cy._config_transport import BindSpec, ChannelTransport


@pytest.mark.parametrize("spec,text", [
    (ChannelTransport.Unix, "unix"), ("unix", "unix"),
    (ChannelTransport.TcpWithHostname, "tcp(Hostname)"), ("tcp", "tcp(Hostname)"),
    (ChannelTransport.TcpWithLocalhost, "tcp(Localhost)"),
    (ChannelTransport.MetaTlsWithIpV6, "metatls(IpV6)"), ("local", "local"),
    ("tls", "tls"), ("quic", "quic"),
    ("tcp://127.0.0.1:8080", "tcp:127.0.0.1:8080"), ("tcp:127.0.0.1:80", "tcp:127.0.0.1:80"),
    ("tcp://localhost:80", "tcp:127.0.0.1:80"), ("tcp://[::1]:80", "tcp:[::1]:80"),
    ("tcp://[0:0::1]:7", "tcp:[::1]:7"), ("ipc:///tmp/s", "unix:/tmp/s"),
    ("ipc://@name", "unix:@name"), ("ipc://", "unix"), ("metatls://h:1", "metatls:h:1"),
    ("tls://host.example:443", "tls:host.example:443"), ("quic://h:9", "quic:h:9"),
])
def test_forms_and_their_text(spec, text):
    b = BindSpec(spec)
    assert str(b) == text
    assert BindSpec(b) == b and hash(BindSpec(b)) == hash(b)
    assert pickle.loads(pickle.dumps(b)) == b


def test_equality_is_by_what_is_named():
    assert BindSpec("tcp") == BindSpec(ChannelTransport.TcpWithHostname)
    assert BindSpec("tcp") != BindSpec(ChannelTransport.TcpWithLocalhost)
    assert BindSpec("ipc://") == BindSpec(ChannelTransport.Unix)
    assert BindSpec("tcp://localhost:5") == BindSpec("tcp://127.0.0.1:5")
    assert BindSpec("unix") != "unix"          # a spec equals specs only
    assert BindSpec("tcp").transport is ChannelTransport.TcpWithHostname
    assert BindSpec("tcp").address is None
    assert BindSpec("tcp://127.0.0.1:5").transport is None
    assert BindSpec("tcp://127.0.0.1:5").address == "tcp:127.0.0.1:5"


@pytest.mark.parametrize("bad", [
    "", " tcp", "TCP", "Unix", "ipc", "metatls", "sim", "tcp(hostname)", "random_string",
    "invalid://scheme", "tcp://1.2.3.4", "tcp://myhost:5", "tcp://127.0.0.1:99999",
    "tcp://127.0.0.1:x", "local://3", "tls://:1", "tcp://[zz]:1"])
def test_bad_strings_are_value_errors_quoting_them(bad):
    with pytest.raises(ValueError) as ei:
        BindSpec(bad)
    assert repr(bad) in str(ei.value)


@pytest.mark.parametrize("bad", [42, None, {}, 1.5, b"tcp"])
def test_other_types_are_type_errors(bad):
    with pytest.raises(TypeError, match="ChannelTransport enum, BindSpec, or str"):
        BindSpec(bad)


def test_immutable_and_readable():
    b = BindSpec("tcp://127.0.0.1:1")
    with pytest.raises(AttributeError, match="immutable"):
        b._kind = "unix"
    assert repr(b) == "BindSpec('tcp://127.0.0.1:1')"
    assert repr(BindSpec(ChannelTransport.Unix)) == "BindSpec(ChannelTransport.Unix)"
