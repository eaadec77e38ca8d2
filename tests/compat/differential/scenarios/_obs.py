"""What every scenario records with: observations (``@@obs`` lines the harness collects),
a step that records a value or the exception it raised, and the client's
``unhandled_fault_hook`` replaced to record (and so drop) what reaches it.  Imported by
the scenarios (their directory is first on ``sys.path``) on both systems."""
import json
import time


def obs(key, value):
    """One observation: a line the harness collects (key -> JSON value)."""
    print("@@obs " + json.dumps([key, value], default=repr), flush=True)


def describe(e):
    text = str(e)
    return {"type": type(e).__name__, "is_exception": isinstance(e, Exception),
            "first_line": text.splitlines()[0] if text else "", "text": text}


def step(key, fn):
    try:
        value = fn()
    except Exception as e:
        value = {"raised": describe(e)}
    obs(key, value)


def wait_until(fn, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not fn() and time.monotonic() < deadline:
        time.sleep(0.05)


# The client's unhandled_fault_hook, replaced to record (and so drop) what reaches it.
hooked = []
reported = []


def record_hook(failure):
    seen = {"type": type(failure).__name__, "mesh_name": failure.mesh_name,
            "str": str(failure), "report_first_line": failure.report().splitlines()[0]}
    hooked.append(seen)
    if reported:
        obs("hook_call_after_report", seen)


def report_hook():
    """The hook's calls so far, in a stable order; later calls are reported one by one."""
    obs("unhandled_fault_hook_calls", sorted(hooked, key=lambda h: h["str"]))
    reported.append(True)

