"""Helpers for the job and worker-loop tests: run a controller scenario
(:mod:`_job_scenarios`) in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from _hosts_support import HERE, scenario_env, wait_gone  # noqa: F401


def run_job(name: str, args: dict | None = None, *, cwd=None, timeout=120,
            check=True, **env):
    e = scenario_env(**env)
    e.pop("MONARCH_CY_JOB_SECRET", None)
    e.pop("MONARCH_CY_JOB_SECRET_FILE", None)
    e.update(env)
    r = subprocess.run([sys.executable, os.path.join(HERE, "_job_scenarios.py"), name,
                        json.dumps(args or {})], env=e, capture_output=True, text=True,
                       timeout=timeout, cwd=cwd)
    res = None
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
    if check and (r.returncode != 0 or res is None):
        raise AssertionError(f"scenario {name} failed (exit {r.returncode}):\n"
                             f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
    return res, r
