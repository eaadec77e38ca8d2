"""exec_command(host_mesh, cmd): the largest return code of the command on every proc,
its output printed here, or written under output_dir."""

import os
import tempfile

from _obs import obs, step  # noqa: E402
from monarch.actor import this_host  # noqa: E402
from monarch.job import exec_command  # noqa: E402

step("max_rc", lambda: exec_command(this_host(), ["sh", "-c", "exit 3"]).get(timeout=60))
d = tempfile.mkdtemp(prefix="diff-")
step("output_dir_rc", lambda: exec_command(
    this_host(), ["sh", "-c", "echo to-file"], output_dir=d).get(timeout=60))
obs("stdout_txt", open(os.path.join(d, "stdout.txt")).read()
    if os.path.exists(os.path.join(d, "stdout.txt")) else None)
