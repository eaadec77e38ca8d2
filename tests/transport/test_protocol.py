"""monarch_cy._transport.protocol: message kinds, the one header pack/unpack, and the
layering rule that the transport imports nothing of the actor model."""

from __future__ import annotations

import ast
import pathlib

import pytest

from monarch_cy._transport import protocol as P

TRANSPORT = pathlib.Path(P.__file__).parent


def test_node_message_round_trip_keeps_header_and_payload():
    f0 = P.pack((P.REPLY, 7, 3, True), b"payload")
    hdr, data = P.unpack(f0)
    assert hdr == (P.REPLY, 7, 3, True) and bytes(data) == b"payload"
    assert f0[1] & 0x80 == 0                    # bit 15 is the sender's to set


def test_call_header_round_trip():
    f0 = P.pack_call("ping", "unix://x", 5, 2, "key", b"ext", b"args")
    hdr, data = P.unpack_call(f0)
    assert hdr == ("ping", "unix://x", 5, 2, "key", b"ext") and bytes(data) == b"args"


def test_more_frames_bit_does_not_change_the_length():
    f0 = bytearray(P.pack((P.SEEN, "x" * 300)))
    f0[1] |= 0x80                               # as Node.send marks multi-frame messages
    hdr, data = P.unpack(bytes(f0))
    assert hdr == (P.SEEN, "x" * 300) and bytes(data) == b""


@pytest.mark.parametrize("make", [
    lambda big: P.pack((P.SEEN, big)),
    lambda big: P.pack_call("m", big, 0, 0, None, None),
])
def test_oversized_headers_are_refused(make):
    with pytest.raises(ValueError, match=r"message header too large \(\d+ bytes; at most "
                                         r"32767\)"):
        make("x" * 40_000)


def test_kinds_are_distinct_and_fit_a_header():
    kinds = {n: getattr(P, n) for n in P.__all__ if n.isupper() and n not in ("MAX_HEADER", "PENDING")}
    assert len(set(kinds.values())) == len(kinds), kinds
    assert all(isinstance(v, int) and 0 <= v < 256 for v in kinds.values())


def test_the_wiring_handles_every_kind_of_the_actor_model():
    """One table per role, keyed by the protocol's kinds; every node kind the
    transport does not handle itself has a handler in one of them."""
    from monarch_cy._actor import wiring
    own = {P.REPLY, P.REPLY_BATCH, P.REPLY_PARTIAL, P.RELEASE, P.PROC_DEAD, P.WAKE, P.CALL}
    kinds = {getattr(P, n) for n in P.__all__
             if n.isupper() and n not in ("MAX_HEADER", "PENDING")}
    handled = set(wiring.CONTROLLER_HANDLERS) | set(wiring.WORKER_HANDLERS)
    assert handled <= kinds
    assert kinds - own == handled


def _imports(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


def test_transport_imports_nothing_above_it():
    bad = [(p.name, m) for p in sorted(TRANSPORT.glob("*.py")) for m in _imports(p)
           if m.startswith("monarch_cy.") and not m.startswith("monarch_cy._transport")
           and m not in ("monarch_cy._errors", "monarch_cy._log", "monarch_cy._config",
                         "monarch_cy._resource",
                         "monarch_cy._checks")]
    assert bad == []


def test_protocol_imports_only_pickle():
    mods = set(_imports(TRANSPORT / "protocol.py")) - {"__future__"}
    assert mods == {"pickle"}
