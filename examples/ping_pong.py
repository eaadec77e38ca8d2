"""Two actors in two processes play ping-pong; the controller referees.

Run: python examples/ping_pong.py
"""

from __future__ import annotations

from monarch_cy.actor import Actor, ActorMesh, endpoint, this_host


class Player(Actor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.hits = 0

    @endpoint
    def hit(self, ball: int) -> int:
        self.hits += 1
        return ball + 1

    @endpoint
    def rally(self, other: ActorMesh, rounds: int) -> int:
        """Hit the ball back and forth with ``other`` (an actor mesh reference)."""
        ball = 0
        for _ in range(rounds):
            ball = other.hit.call_one(ball).get()
            ball += 1
            self.hits += 1
        return ball


def main() -> int:
    procs = this_host().spawn_procs(per_host={"procs": 2})
    ping = procs.slice(procs=0).spawn("ping", Player, "ping")
    pong = procs.slice(procs=1).spawn("pong", Player, "pong")
    ball = ping.rally.call_one(pong, 100).get()
    print(f"rally finished: the ball was hit {ball} times")
    assert ball == 200
    procs.stop().get()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
