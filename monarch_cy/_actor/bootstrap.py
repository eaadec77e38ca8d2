"""Entry point of every proc: ``python -m monarch_cy._actor.bootstrap``.

The controller writes a JSON config (job secret, addresses, ranks, ``sys.path``)
to the proc's stdin and closes it: the secret is never on a command line.  The
per-rank environment (``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``,
``MONARCH_CY_RANK``...) is set by the controller before this process starts, so it
is in place before any user code runs.  This module imports no torch.

The main thread then pumps the proc's inbox forever; it exits on STOP (after
flushing queued messages, at most ~1 s) or as soon as the controller dies.
"""

from __future__ import annotations

import json
import os
import sys
import threading


def _stop(node, hdr, data, extras) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    with node._out_lock:
        for s, lock in node._out.values():
            lock.acquire()
            s.close(linger=1000)
    node.inbox.close(linger=0)
    node._zap.close(linger=0)
    t = threading.Thread(target=node.ctx.term, daemon=True)
    t.start()
    t.join(1.0)
    os._exit(0)


def main() -> None:
    cfg = json.loads(sys.stdin.buffer.read())
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    sys.path[:] = list(cfg["sys_path"]) + [p for p in sys.path if p not in cfg["sys_path"]]
    from monarch_cy._actor import actor_host, logs
    from monarch_cy._actor.auth import JobKeys
    from monarch_cy._actor.node import SPAWN, STOP, Node, set_node
    node = Node(cfg["addr"], JobKeys(bytes.fromhex(cfg["secret"])), rundir=cfg["rundir"],
                is_controller=False)
    set_node(node)
    node.handlers[SPAWN] = actor_host.handle_spawn
    node.handlers[STOP] = _stop
    logs.install_forwarding(node, cfg["controller"], cfg["mesh_id"], cfg["proc_rank"])
    node.watch_pid(cfg["controller_pid"], lambda pid: os._exit(1))
    node.serve_forever()


if __name__ == "__main__":
    main()
