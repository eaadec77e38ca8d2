"""Python logging inside an actor: a record reaching a handler the actor added shows
Monarch's "[actor=<root>.<module.Class name{point}>] " prefix; an empty message is
left alone."""

import logging
import os
import tempfile

from _obs import obs  # noqa: E402

from monarch.actor import Actor, endpoint, this_host  # noqa: E402


class Logger(Actor):
    def __init__(self, path):
        self.handler = logging.FileHandler(path, mode="a")
        self.handler.setLevel(logging.INFO)
        logging.getLogger().addHandler(self.handler)

    @endpoint
    def log(self, text):
        logging.getLogger().warning("%s from root", text)
        logging.getLogger("child.logger").warning("%s from a child logger", text)
        logging.getLogger().warning("")
        self.handler.flush()


folder = tempfile.mkdtemp(prefix="diff-")
pm = this_host().spawn_procs(per_host={"gpus": 2})
paths = [os.path.join(folder, f"rank{r}.log") for r in range(2)]
loggers = [pm.slice(gpus=r).spawn(f"logger_{r}", Logger, paths[r]) for r in range(2)]
for r, lg in enumerate(loggers):
    lg.log.call_one(f"hello {r}").get(timeout=60)
for r in range(2):
    with open(paths[r]) as f:
        obs(f"rank{r}", f.read().splitlines())
pm.stop().get(timeout=60)
