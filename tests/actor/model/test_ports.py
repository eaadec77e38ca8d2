"""Channels, ports and explicit response ports."""

import pickle

import pytest

from monarch_cy.actor import Channel, Port, PortReceiver


def test_channel_local_roundtrip():
    port, recv = Channel.open()
    assert isinstance(port, Port) and isinstance(recv, PortReceiver)
    f = recv.recv()
    port.send(1)
    port.send(2)
    assert f.get(5) == 1 and recv.recv().get(5) == 2
    port.exception(KeyError("k"))
    with pytest.raises(KeyError):
        recv.recv().get(5)
    recv.close()


def test_port_sent_to_actors(echo):
    port, recv = Channel.open()
    assert echo.send_to.call(port, "hi").get(10).values() == [True] * 4
    assert [recv.recv().get(10) for _ in range(4)] == ["hi"] * 4
    recv.close()


def test_port_pickles():
    port, recv = Channel.open()
    back = pickle.loads(pickle.dumps(port))
    back.send(5)
    assert recv.recv().get(5) == 5
    recv.close()


def test_explicit_response_port(echo):
    one = echo.slice(gpus=1)
    assert one.countdown.call_one(1).get(10) == 1
    got = [f.get(10) for f in one.countdown.stream(1)]
    assert got == [1]
    # the first send answers a call; with call() each rank answers once
    assert echo.countdown.call(1).get(10).values() == [1] * 4
