"""``Port.return_undeliverable`` and ``PortReceiver.ranked()`` (Monarch's)."""

from __future__ import annotations

import pickle

import pytest

from monarch_cy.actor import Channel, send


def test_return_undeliverable_flag():
    port, recv = Channel.open()
    assert port.return_undeliverable is True
    port.return_undeliverable = False
    assert port.return_undeliverable is False
    assert pickle.loads(pickle.dumps(port)).return_undeliverable is False
    with pytest.raises(TypeError, match="True or False"):
        port.return_undeliverable = 1
    # a send to a closed port is dropped (never returned), whatever the flag
    recv.close()
    port.send(1)
    recv.close()


def test_ranked_view_shares_the_channel(echo):
    port, recv = Channel.open()
    ranked = recv.ranked()
    assert type(ranked) is type(recv)
    send(echo.ping, (7,), {}, port=port)          # each actor answers with its rank
    got = [ranked.recv().get(10) for _ in range(2)] + [recv.recv().get(10)
                                                       for _ in range(2)]
    assert sorted(r for r, _ in got[:2]) == sorted(set(r for r, _ in got[:2]))
    assert all(v == 7 for _, v in got[:2]) and got[2:] == [7, 7]
    port.send("plain")                            # a plain send has no rank
    assert ranked.recv().get(10) == (None, "plain")
    port.exception(ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        ranked.recv().get(10)
    recv.close()


def test_open_ranked_is_open_then_ranked(echo):
    port, recv = Channel.open_ranked()
    send(echo.ping, (1,), {}, port=port)
    ranks = sorted(recv.recv().get(10)[0] for _ in range(4))
    assert ranks == [0, 1, 2, 3]
    recv.close()
