"""codec_max_frame_length bounds a message: with a 1 MiB limit, a call whose
arguments total 1 MiB fails with SupervisionError; small ones go through.  With the
argument "after", what a later small call on the same actor does."""

import sys

import monarch.actor
from _obs import obs, step  # noqa: E402

monarch.actor.unhandled_fault_hook = lambda failure: None   # Monarch also reports there

from monarch.actor import Actor, endpoint, this_host  # noqa: E402
from monarch.config import configured, get_global_config  # noqa: E402

MIB = 1024 * 1024


class Chunker(Actor):
    @endpoint
    def count(self, chunks):
        return len(chunks)


with configured(codec_max_frame_length=MIB):
    obs("limit", get_global_config()["codec_max_frame_length"])
    pm = this_host().spawn_procs()
    c = pm.spawn("chunker", Chunker)
    step("small", lambda: c.count.call_one([b"x"] * 3).get(timeout=60))
    try:     # the type and the call named (the causes differ: see the "after" case)
        c.count.call_one([bytes(MIB // 4) for _ in range(4)]).get(timeout=90)
        obs("big", "answered")
    except Exception as e:  # noqa: BLE001 - the observation
        obs("big", [type(e).__name__, str(e).startswith(
            "Endpoint call chunker.count() failed, The actor ")])
    if sys.argv[1:] == ["after"]:
        step("after", lambda: c.count.call_one([b"y"]).get(timeout=30))
obs("done", True)
