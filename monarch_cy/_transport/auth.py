"""Job authentication: CurveZMQ keys from the per-job secret, and the ZAP handler.

The controller draws a 32-byte secret per job (``os.urandom``) and hands it to its
procs through their stdin pipe (never a command line, never the environment).  The
secret is a Curve secret key; every proc of the job uses that one keypair both as
server (bound sockets) and as client (connecting sockets).

Connecting to a job socket therefore needs the secret twice over: the client must
know the server's public key to start the CURVE handshake, and our ZAP handler (on
``inproc://zeromq.zap.01`` of the node's context, bound *before* any server socket)
admits only clients that prove possession of the job's secret key.  libzmq delivers
nothing from a connection before the handshake and ZAP approve it, so nothing an
unauthenticated peer sends is ever deserialized; a failed handshake drops the peer.

Replay: CURVE needs no nonce memory of ours.  Each connection's handshake is keyed
by short-term keypairs both ends draw for it (libzmq's ``curve_server_t`` makes one
per connection, and a fresh cookie key per WELCOME), and the client's INITIATE
vouches for its short-term key with the long-term one; captured handshake commands
therefore open nothing on any later connection, to this process or a respawned one,
and captured MESSAGE boxes open only under their session's keys, with nonces that
must increase.  The same-host ``unix://`` transport has its own proof, bound to the
inbox's incarnation (:mod:`.unixsock`).
"""

from __future__ import annotations

import hmac

__all__ = ["JobKeys", "ZAP_ENDPOINT"]

ZAP_ENDPOINT = "inproc://zeromq.zap.01"


class JobKeys:
    """The job's 32-byte secret and the Curve keypair derived from it (computed, and
    zmq imported, on first use: the ``unix://`` transport needs only the secret)."""

    __slots__ = ("secret", "_curve")

    def __init__(self, secret: bytes | None = None) -> None:
        if secret is None:
            from monarch_cy._transport.secret import new_secret
            secret = new_secret()
        if len(secret) != 32:
            raise ValueError(f"job secret must be 32 bytes, not {len(secret)}")
        self.secret = bytes(secret)
        self._curve = None

    def _keys(self) -> tuple:
        if self._curve is None:
            import zmq
            from zmq.utils import z85
            sz = z85.encode(self.secret)
            pz = zmq.curve_public(sz)
            self._curve = (sz, pz, z85.decode(pz))
        return self._curve

    @property
    def secret_z85(self) -> bytes:
        return self._keys()[0]

    @property
    def public_z85(self) -> bytes:
        return self._keys()[1]

    @property
    def public_raw(self) -> bytes:
        return self._keys()[2]

    def fingerprint(self, label: bytes) -> bytes:
        """16 bytes naming this job for ``label`` (an HMAC of the secret: same in
        every proc of the job, useless for recovering the secret)."""
        return hmac.digest(self.secret, label, "sha256")[:16]

    def server(self, sock) -> None:
        """Make ``sock`` a CURVE server of this job (before bind)."""
        sock.curve_secretkey = self.secret_z85
        sock.curve_publickey = self.public_z85
        sock.curve_server = True
        sock.zap_domain = b"monarch_cy"

    def client(self, sock) -> None:
        """Make ``sock`` a CURVE client of this job (before connect)."""
        sock.curve_serverkey = self.public_z85
        sock.curve_publickey = self.public_z85
        sock.curve_secretkey = self.secret_z85

    def handle_zap(self, zap_sock, on_refused=None) -> None:
        """Answer every pending ZAP request on ``zap_sock`` (a bound REP socket),
        without blocking: a CURVE peer holding this job's key is accepted, anything
        else refused.  ``on_refused(peer_address)`` is called for each refusal."""
        import zmq
        while True:
            try:
                msg = zap_sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            version, request_id = msg[0], msg[1]
            mechanism = msg[5] if len(msg) > 5 else b""
            creds = msg[6] if len(msg) > 6 else b""
            ok = mechanism == b"CURVE" and hmac.compare_digest(creds, self.public_raw)
            if not ok and on_refused is not None:
                on_refused(msg[3].decode(errors="replace") if len(msg) > 3 else "?")
            zap_sock.send_multipart([version, request_id, b"200" if ok else b"400",
                                     b"OK" if ok else b"not a member of this job",
                                     b"", b""])
