"""Every ``MONARCH_CY_*`` environment variable: one table, one typed accessor each.

:data:`VARIABLES` declares each variable once -- name, type, default, who sets it,
meaning -- and ``docs/configuration.md`` is that table printed
(``python -m monarch_cy._config``; a test keeps the two equal, and another fails
for a ``MONARCH_CY_*`` name anywhere in the source that is not declared here).

Rules, the same for every variable:

* **Read at call time.**  Each accessor looks at ``os.environ`` when called;
  nothing is cached here, because tests and workers set variables at run time.
  (A few *callers* read once and keep the value: the table says which.)
* **Unset or blank is the default.**  A value of only whitespace counts as unset;
  other values are stripped first, and choices compare case-insensitively.
* **A bad value raises** ``ValueError`` naming the variable and quoting the value,
  e.g. ``MONARCH_CY_HOST_TIMEOUT='abc' must be a positive number of seconds``.
  The job secret is never quoted (:mod:`monarch_cy._transport.secret` checks it and
  names only where it came from).
* **Runtime overrides win over the environment.**  :func:`set_override` gives a
  variable a value for this process only (checked when set, then read like an
  environment value); :func:`clear_override` removes it.  ``monarch.config.configure``
  sets them (:mod:`monarch_cy._config_api`), and ``spawn_procs`` hands the overrides
  in effect to the procs it starts, in their environment (as Monarch's procs start
  with their spawner's configuration); other processes this one starts inherit the
  environment only.

Types: ``text`` (a path, an address, a name), ``secret`` (text, never echoed),
``flag`` (``0`` or ``1``), a choice (``unix``, ``ipc`` or ``tcp``...), ``int``
(with a minimum, or clamped to a range), ``seconds > 0`` / ``seconds >= 0``
(a float; NaN refused; ``inf`` means never), ``ports`` (``A-B``, inclusive, read
as the tuple ``(A, B)``).

``who``: ``user`` (set it to configure), ``internal`` (set by monarch_cy for the
processes it starts; read them, do not set them), ``tests`` (the test suite and
benchmarks only; the package never reads them).

This module imports only :mod:`os` (it sits on start-up paths), and nothing from
the actor layer.
"""

from __future__ import annotations

import os

__all__ = ["Var", "VARIABLES", "get", "declared", "markdown_table", "set_override",
           "clear_override", "overrides", "generation"]

USER, INTERNAL, TESTS = "user", "internal", "tests"


class Var:
    """One variable: how to parse it and what it means (see the module docstring)."""

    __slots__ = ("name", "kind", "default", "who", "meaning", "choices", "noun",
                 "minimum", "clamp")

    def __init__(self, name: str, kind: str, default, who: str, meaning: str, *,
                 choices: tuple = (), noun: str = "", minimum: int | None = None,
                 clamp: tuple | None = None) -> None:
        assert kind in _PARSERS, kind
        self.name: str = name
        self.kind: str = kind
        self.default = default
        self.who: str = who
        self.meaning: str = meaning
        self.choices: tuple = choices
        self.noun: str = noun
        self.minimum: int | None = minimum
        self.clamp: tuple | None = clamp

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.kind!r}, default={self.default!r})"

    def read(self, environ=None):
        """The value now: parsed, or :attr:`default` when unset or blank.  Without
        ``environ``, a runtime override (:func:`set_override`) wins over
        ``os.environ``."""
        raw = None if environ is not None else _OVERRIDES.get(self.name)
        if raw is None:
            raw = (os.environ if environ is None else environ).get(self.name)
        if raw is None or not raw.strip():
            return self.default
        return _PARSERS[self.kind](self, raw)

    def type_text(self) -> str:
        if self.kind == "choice":
            return ", ".join(f"`{c}`" for c in self.choices)
        if self.kind == "int":
            if self.clamp:
                return f"int, clamped to {self.clamp[0]}..{self.clamp[1]}"
            return "int" if self.minimum is None else f"int >= {self.minimum}"
        return {"flag": "`0` or `1`", "seconds": "seconds > 0",
                "seconds0": "seconds >= 0", "ports": "port range `A-B`"}.get(
                    self.kind, self.kind)

    def default_text(self) -> str:
        d = self.default
        if d is None:
            return "unset"
        if isinstance(d, bool):
            return "`1`" if d else "`0`"
        if isinstance(d, float):
            return f"{d:g}"
        return f"`{d}`"


def _bad(var: Var, raw: str, what: str) -> ValueError:
    return ValueError(f"{var.name}={raw!r} {what}")


def _text(var: Var, raw: str) -> str:
    return raw.strip()


def _flag(var: Var, raw: str) -> bool:
    v = raw.strip()
    if v not in ("0", "1"):
        raise _bad(var, raw, "must be 0 or 1")
    return v == "1"


def _choice(var: Var, raw: str) -> str:
    v = raw.strip().lower()
    if v not in var.choices:
        raise _bad(var, raw, f"is not {var.noun}; use one of {', '.join(var.choices)}")
    return v


def _int(var: Var, raw: str) -> int:
    need = "must be an int" + ("" if var.minimum is None else f" >= {var.minimum}")
    try:
        v = int(raw.strip())
    except ValueError:
        raise _bad(var, raw, need) from None
    if var.minimum is not None and v < var.minimum:
        raise _bad(var, raw, need)
    if var.clamp:
        v = max(var.clamp[0], min(var.clamp[1], v))
    return v


def _seconds(var: Var, raw: str) -> float:
    zero = var.kind == "seconds0"
    try:
        v = float(raw.strip())
    except ValueError:
        v = float("nan")
    if not (v > 0 or (zero and v == 0)):          # NaN fails both
        raise _bad(var, raw, "must be a number of seconds >= 0" if zero
                   else "must be a positive number of seconds")
    return v


def _ports(var: Var, raw: str) -> tuple:
    lo, sep, hi = raw.strip().partition("-")
    if not (sep and lo.strip().isdigit() and hi.strip().isdigit()
            and 0 < int(lo) <= int(hi) < 65536):
        raise _bad(var, raw, "must be a port range A-B with 1 <= A <= B <= 65535")
    return int(lo), int(hi)


_PARSERS = {"text": _text, "secret": _text, "flag": _flag, "choice": _choice,
            "int": _int, "seconds": _seconds, "seconds0": _seconds, "ports": _ports}

_V = Var
VARIABLES: dict[str, Var] = {v.name: v for v in [
    # -- job secret and hosts (monarch_cy._hosts)
    _V("MONARCH_CY_JOB_SECRET", "secret", None, USER,
       "The job's 32-byte secret as 64 hex digits, for host agents (used when no secret "
       "file is named). `SlurmJob` sets it for the agents it submits."),
    _V("MONARCH_CY_JOB_SECRET_FILE", "text", None, USER,
       "A file holding the job secret (64 hex digits, mode 0600); wins over "
       "`MONARCH_CY_JOB_SECRET`, and the agent's `--secret-file` wins over both."),
    _V("MONARCH_CY_HOST", "text", None, USER,
       "The address the controller's actor runtime binds for remote hosts (procs reply "
       "to it); default: this machine's address on the route to the first worker (SLURM: "
       "to the controller daemon). Set it before anything starts the runtime."),
    _V("MONARCH_CY_CONTROLLER_INTERFACE", "text", None, USER,
       "A network interface (e.g. `ib0`) whose IPv4 address the controller binds for "
       "remote hosts, instead of guessing from the route; setting it together with "
       "`MONARCH_CY_HOST` is an error. Read when the runtime starts for remote hosts."),
    _V("MONARCH_CY_CONTROLLER_PORTS", "ports", None, USER,
       "The ports the controller listens on for remote hosts and their procs (its actor "
       "runtime's two, the named-controller registry's, and a job's agent port given as "
       "`0`); unset: ports the OS picks. Read as each port is chosen; a range with no "
       "free port left is an error naming it."),
    _V("MONARCH_CY_HOST_ADDRESS", "text", None, USER,
       "This host's address as other hosts reach it, given to collective groups' "
       "rendezvous; default: the address of its host name, else `127.0.0.1`."),
    _V("MONARCH_CY_AGENT_RANK", "int", None, USER,
       "A host agent's rank in its mesh (default of `--rank`; then `SLURM_NODEID`).",
       minimum=0),
    _V("MONARCH_CY_HOST_TIMEOUT", "seconds", 10.0, USER,
       "A remote host (or, at an agent, the controller) silent this long counts as lost; "
       "heartbeats go every fifth of it. Read by the controller when its host hub starts; "
       "agents take the controller's value."),
    _V("MONARCH_CY_ATTACH_TIMEOUT", "seconds", 30.0, USER,
       "Seconds each agent has to answer `attach_to_workers` (its `timeout=` default)."),
    # -- GPU runtime and collectives (monarch_cy._runtime, monarch_cy._collectives)
    _V("MONARCH_CY_GPU_PLATFORM", "choice", "auto", USER,
       "The GPU platform to bind (runtime, NCCL/RCCL); `none` switches GPU support off. "
       "`setup.py` reads it at build time too: `cuda`/`rocm` compile against the vendor "
       "headers.", choices=("cuda", "rocm", "none", "auto"), noun="a platform"),
    _V("MONARCH_CY_GPU_RUNTIME_LIBRARY", "text", None, USER,
       "Bind this libcudart/libamdhip64 file and nothing else (its platform is read off "
       "its symbols)."),
    _V("MONARCH_CY_NCCL_LIBRARY", "text", None, USER,
       "Bind this libnccl/librccl file and nothing else."),
    # -- RDMA buffers (monarch_cy._rdma_buffer)
    _V("MONARCH_CY_RDMA_BACKEND", "choice", "auto", USER,
       "Force one `RDMABuffer` backend for operations without `backend=` (read at each "
       "call); one that cannot serve a pair raises `BackendUnavailableError`.",
       choices=("auto", "local", "cma", "ipc", "ibverbs", "tcp"), noun="a backend"),
    _V("MONARCH_CY_RDMA_VERBS", "flag", True, USER,
       "`0`: this process never uses ibverbs (read once per process)."),
    _V("MONARCH_CY_RDMA_DEVICE", "text", None, USER,
       "The verbs device this process opens (default: the first); read at first use."),
    _V("MONARCH_CY_RDMA_IBVERBS_TARGET", "text", None, USER,
       "Monarch's `rdma_ibverbs_target`: `nic:<name>` opens that verbs device (it wins "
       "over `MONARCH_CY_RDMA_DEVICE`), `cpu:<numa>` / `gpu:<ordinal>` leave the choice "
       "automatic; any other value makes `RDMABuffer(...)` and `RDMAAction.submit()` "
       "raise `RdmaInitError` naming it. Read at each of those calls."),
    _V("MONARCH_CY_RDMA_CMA_THREADS", "int", 2, USER,
       "Threads that copy one cross-memory-attach span of 8 MiB or more; read when "
       "`monarch_cy._rdma_buffer._cma` is imported.", clamp=(1, 4)),
    # -- actor runtime (monarch_cy._actor)
    _V("MONARCH_CY_TRANSPORT", "choice", "unix", USER,
       "Transport between the processes of one host: `unix` (AF_UNIX seqpacket), `ipc` "
       "(zmq over ipc://) or `tcp` (zmq over loopback).",
       choices=("unix", "ipc", "tcp"), noun="a transport"),
    _V("MONARCH_CY_AUTH_TIMEOUT", "seconds", 5.0, USER,
       "A `unix://` connection that has not proved it belongs to the job this long after "
       "its inbox accepted it is closed unread (`inf`: never), even while no thread "
       "reads that inbox. Read when an inbox is made."),
    _V("MONARCH_CY_START", "choice", "fork", USER,
       "How local procs start: forked by a zygote, or `exec` of one "
       "`python -m monarch_cy._actor.bootstrap` per proc.",
       choices=("fork", "exec"), noun="a start method"),
    _V("MONARCH_CY_PIN_GPUS", "flag", None, USER,
       "`1`: the `gpus` coordinate of `spawn_procs` sets each proc's visible devices; `0`: "
       "it never does; unset: it does unless `monarch_cy.compat` is installed."),
    _V("MONARCH_CY_HEARTBEAT_TIMEOUT", "seconds0", 10.0, USER,
       "A proc silent this long is failed and killed; `0` turns heartbeats off "
       "(`spawn_procs(heartbeat_timeout=)` wins)."),
    _V("MONARCH_CY_RUN_DIR", "text", None, USER,
       "Where the controller makes its private run directory (its procs' `unix://` "
       "sockets). Unset: `$TMPDIR` when set, else `/dev/shm` when it is a writable tmpfs "
       "(creating thousands of sockets on a disk file system costs seconds of kernel "
       "time), else the system's temporary directory."),
    _V("MONARCH_CY_CAST_FANOUT", "int", 16, USER,
       "A call from the controller to more actors than this goes down a tree of the "
       "mesh's procs, each forwarding to at most this many (docs/scale.md); `0` sends to "
       "every actor directly. Read when the controller first calls a mesh.", minimum=0),
    _V("MONARCH_CY_CAST_NOGIL", "flag", True, USER,
       "`1` (the default): casts down the tree of a one-host (`unix://`) mesh are passed "
       "on, and their replies gathered, by each proc's nogil forwarder thread (a busy "
       "actor, even one holding the GIL, does not hold its subtree back; an "
       "`Accumulator`'s `merge=` fold then runs at the controller); `0`: forwarded, "
       "gathered and folded by the procs' I/O threads, as for meshes across hosts "
       "(docs/scale.md). Read once."),
    _V("MONARCH_CY_INTERLEAVE", "flag", False, USER,
       "`1`: every async actor's plain `@endpoint`s interleave at each `await` (as "
       "`class A(Actor, interleave=True)`, monarch_cy's opt-in), for programs written "
       "for Monarch before it ran them one at a time; `0` (Monarch's): one message at "
       "a time unless `@concurrent_endpoint`. Read in each proc as an actor starts."),
    _V("MONARCH_CY_SUPERVISE_TIMEOUT", "seconds0", 10.0, USER,
       "Seconds an owner's `__supervise__` may run before it counts as hung (read in the "
       "actor's proc)."),
    _V("MONARCH_CY_CLEANUP_TIMEOUT", "seconds0", 3.0, USER,
       "Seconds an actor's `__cleanup__` may run before it counts as hung (Monarch's "
       "`cleanup_timeout`; read in the actor's proc as the actor stops)."),
    _V("MONARCH_CY_MAX_MESSAGE_BYTES", "int", 10737418240, USER,
       "The largest message (its pickle and buffers together) a process sends "
       "(Monarch's `codec_max_frame_length`): a call with larger arguments fails with "
       "`SupervisionError` and is not sent, a larger reply reaches its caller as an "
       "error. Read at the process's first message and again after each runtime "
       "override (`monarch.config.configure`).", minimum=0),
    _V("MONARCH_CY_FAULT_GRACE", "seconds0", 1.0, USER,
       "Under `MONARCH_CY_FAULT_HOOK_SKIPS_SEEN`, seconds the client has to see or "
       "recover a failure before `unhandled_fault_hook` runs (by default it runs at "
       "once, as Monarch's); read once, when the actor runtime is imported."),
    _V("MONARCH_CY_FAULT_HOOK_SKIPS_SEEN", "flag", False, USER,
       "`1`: a client-owned failure the program already saw (a call on it raised "
       "`SupervisionError`) or recovered within `MONARCH_CY_FAULT_GRACE` does not reach "
       "`unhandled_fault_hook` (monarch_cy's rule); `0` (Monarch's): every failure "
       "does, at once, and so does each call to an actor that had failed. The default of "
       "`monarch_cy.actor.fault_hook_skips_seen`, read when the actor runtime is "
       "imported."),
    _V("MONARCH_CY_LOG_LEVEL", "choice", None, USER,
       "Level of the `monarch_cy` loggers (the runtime's own messages). Unset: warnings "
       "and errors reach stderr through `logging`'s last-resort handler, or through your "
       "own `logging` configuration; set: a stderr handler at that level, with the "
       "logger name and level on each line. Read once per process, at the first message.",
       choices=("debug", "info", "warning", "error", "critical"), noun="a log level"),
    _V("MONARCH_CY_TELEMETRY", "flag", False, USER,
       "`1`: OpenTelemetry spans and metrics of calls, endpoints and respawns in this "
       "process (docs/observability.md); needs `opentelemetry-api` and "
       "`opentelemetry-sdk`. Read once, when the process's actor runtime starts (the "
       "controller's first call or spawn, a worker's start); `enable_telemetry()` sets "
       "it for the procs started after it."),
    _V("MONARCH_CY_TELEMETRY_OTLP_ENDPOINT", "text", None, USER,
       "With telemetry on, export spans and metrics to this OTLP endpoint (`http://host:"
       "4318` for OTLP/HTTP) instead of this process's in-memory reader; unset: "
       "`OTEL_EXPORTER_OTLP_ENDPOINT`, else the in-memory reader. Read when telemetry "
       "starts in a process."),


    _V("MONARCH_CY_TAIL_LOG_LINES", "int", None, USER,
       "How many of a proc's last lines of output (stdout and stderr together) its "
       "failure carries (`MeshFailure`, `SupervisionError`, the fault hook's report); "
       "`0`: none; unset: 20, or Monarch's 0 under `monarch_cy.compat` (a Monarch "
       "program's failure texts stay Monarch's). Monarch's `tail_log_lines`. Read by "
       "the controller as each proc starts (docs/observability.md).", minimum=0),
    _V("MONARCH_CY_KEEP_FAILED_LOGS", "flag", True, USER,
       "`1`: when a proc failed during the run, the procs' log files (`<run dir>/logs`) "
       "outlive the run directory, moved to `monarch_cy-logs-<run dir's name>` in the "
       "system's temporary directory at the controller's exit (or by the run "
       "directory's reaper if it was killed); `0`: they go with it. Read when the run "
       "directory is made and at exit.", ),


    _V("MONARCH_CY_DEBUG_CONSOLE", "choice", "auto", USER,
       "Where the `monarch_dbg>` prompt opens when an actor pauses at `breakpoint()`: "
       "`auto`, on the controller's terminal when its stdin and stdout are terminals; "
       "`off`, never there (attach with `monarch-cy debug`). Read at each first pause.",
       choices=("auto", "off"), noun="a mode"),
    _V("MONARCH_CY_RANK", "int", None, INTERNAL,
       "Set by `spawn_procs` in every proc: its rank in the proc mesh.", minimum=0),
    _V("MONARCH_CY_WORLD_SIZE", "int", None, INTERNAL,
       "Set by `spawn_procs` in every proc: the number of procs in the mesh.", minimum=1),
    _V("MONARCH_CY_GPU_COORD", "int", None, INTERNAL,
       "Sent by the controller to a host agent with each proc to start: its `gpus` "
       "coordinate, which the agent maps onto the GPUs it was given.", minimum=0),
    _V("MONARCH_CY_GPU_UNPINNED", "text", None, INTERNAL,
       "Set in a proc whose visible GPUs `spawn_procs` pinned to its `gpus` coordinate: "
       "the device variables it had before (JSON), which `monarch_cy.spmd` restores so "
       "that a torchrun script sees every GPU of its host, as under torchrun."),
    _V("MONARCH_CY_MONARCH_CONFIG", "text", None, INTERNAL,
       "Set by `spawn_procs` in every proc when the spawner had `monarch.config` keys "
       "set: those keys and values (JSON), the proc's starting configuration, as "
       "Monarch's procs start with their spawner's."),
    # -- the test suite and benchmarks (tests/, bench/, scripts/)
    _V("MONARCH_CY_CHAOS_SEED", "int", 1234, TESTS,
       "Seed of `tests/actor/test_chaos.py`'s random kills."),
    _V("MONARCH_CY_CHAOS_ROUNDS", "int", 1, TESTS,
       "Rounds of kill events (18 each) of `tests/actor/test_chaos_tree.py`.", minimum=1),
    _V("MONARCH_CY_RCCL_CHROOT", "choice", "1", TESTS,
       "The RCCL chroot tests: `0` skips them, `require` turns their skips into failures.",
       choices=("0", "1", "require"), noun="a mode"),
    _V("MONARCH_CY_RCCL_BUILD_TIMEOUT", "seconds", 180.0, TESTS,
       "Bound on building the RCCL chroot."),
    _V("MONARCH_CY_RCCL_CACHE", "text", "/var/tmp/monarch_cy-rccl-trixie", TESTS,
       "Where the RCCL chroot is kept."),
    _V("MONARCH_CY_DEBIAN_MIRROR", "text", None, TESTS,
       "Debian mirror for the RCCL chroot (default: debootstrap's)."),
    _V("MONARCH_CY_RDMA_GUEST", "text", "1", TESTS,
       "`0` (or `no`, `off`, `false`) skips the soft-RoCE guest tests."),
    _V("MONARCH_CY_RDMA_GUEST_TIMEOUT", "seconds", 420.0, TESTS,
       "Bound on booting the soft-RoCE guest."),
    _V("MONARCH_CY_RDMA_GUEST_CACHE", "text", "/var/tmp/monarch_cy-rdma-guest", TESTS,
       "Where the soft-RoCE guest's image is kept."),
    _V("MONARCH_CY_VENDOR_WHEELS", "choice", "1", TESTS,
       "The ABI proofs that install vendor wheels (hip-python per ROCm release, CUDA "
       "header wheels): `0` skips them, `require` turns a failed download into a failure.",
       choices=("0", "1", "require"), noun="a mode"),
    _V("MONARCH_CY_VENDOR_WHEEL_CACHE", "text", "/var/tmp/monarch_cy-vendor-wheels", TESTS,
       "Where the ABI proofs keep the vendor wheels they install (one folder per release)."),
    _V("MONARCH_CY_WHEEL_TEST", "choice", "1", TESTS,
       "`tests/test_wheel.py` (builds the wheels, installs one in a chroot with no compiler): "
       "`0` skips it, `require` turns its skips into failures.",
       choices=("0", "1", "require"), noun="a mode"),
    _V("MONARCH_CY_WHEEL_CACHE", "text", "/var/tmp/monarch_cy-wheel-test", TESTS,
       "Where `tests/test_wheel.py` keeps the wheels it built (by source hash), its build tools, their "
       "dependencies and its bookworm chroot."),
    _V("MONARCH_CY_BENCH_JSON", "text", None, TESTS,
       "Benchmarks also write their rows as JSON to this file."),
]}
del _V


def declared(name: str) -> bool:
    return name in VARIABLES


# -- runtime overrides: this process only, consulted before os.environ ---------------

_OVERRIDES: dict[str, str] = {}
_generation = [0]               # bumped at every change of _OVERRIDES


def set_override(name: str, raw: str) -> None:
    """Give declared variable ``name`` the value ``raw`` (text, as in the environment)
    in this process, winning over ``os.environ``.  ``raw`` is parsed first: a bad
    value raises ``ValueError`` naming the variable and nothing changes.  ``KeyError``
    for an undeclared name."""
    var = VARIABLES[name]
    raw = str(raw)
    if raw.strip():
        _PARSERS[var.kind](var, raw)
    _OVERRIDES[name] = raw
    _generation[0] += 1


def clear_override(name: str | None = None) -> None:
    """Remove the override of ``name`` (every override when None)."""
    if name is None:
        _OVERRIDES.clear()
    else:
        _OVERRIDES.pop(name, None)
    _generation[0] += 1


def generation() -> int:
    """A number that changes at every :func:`set_override` / :func:`clear_override`:
    a caller that keeps a value (read on a hot path) reads it again when it moved."""
    return _generation[0]


def overrides() -> dict:
    """The overrides in effect: ``{variable: raw value}`` (a copy)."""
    return dict(_OVERRIDES)


def get(name: str, environ=None):
    """The value of declared variable ``name`` now (``KeyError`` for an undeclared one)."""
    return VARIABLES[name].read(environ)


# -- typed accessors, one per variable the package reads ------------------------------

def job_secret() -> str | None:
    return get("MONARCH_CY_JOB_SECRET")


def job_secret_file() -> str | None:
    return get("MONARCH_CY_JOB_SECRET_FILE")


def host() -> str | None:
    return get("MONARCH_CY_HOST")


def controller_interface() -> str | None:
    return get("MONARCH_CY_CONTROLLER_INTERFACE")


def controller_ports() -> tuple | None:
    """``(first, last)`` port, inclusive; None when unset."""
    return get("MONARCH_CY_CONTROLLER_PORTS")


def host_address() -> str | None:
    return get("MONARCH_CY_HOST_ADDRESS")


def agent_rank() -> int | None:
    return get("MONARCH_CY_AGENT_RANK")


def host_timeout() -> float:
    return get("MONARCH_CY_HOST_TIMEOUT")


def attach_timeout() -> float:
    return get("MONARCH_CY_ATTACH_TIMEOUT")


def gpu_platform() -> str:
    """``cuda``, ``rocm``, ``none`` or ``auto``."""
    return get("MONARCH_CY_GPU_PLATFORM")


def gpu_runtime_library() -> str | None:
    return get("MONARCH_CY_GPU_RUNTIME_LIBRARY")


def nccl_library() -> str | None:
    return get("MONARCH_CY_NCCL_LIBRARY")


def rdma_backend() -> str:
    return get("MONARCH_CY_RDMA_BACKEND")


def rdma_verbs() -> bool:
    return get("MONARCH_CY_RDMA_VERBS")


def rdma_device() -> str | None:
    return get("MONARCH_CY_RDMA_DEVICE")


def rdma_cma_threads() -> int:
    return get("MONARCH_CY_RDMA_CMA_THREADS")


def transport() -> str:
    return get("MONARCH_CY_TRANSPORT")


def auth_timeout() -> float:
    return get("MONARCH_CY_AUTH_TIMEOUT")


def start_method() -> str:
    return get("MONARCH_CY_START")


def pin_gpus() -> bool | None:
    """True/False when set; None when unset (the caller decides: on unless compat)."""
    return get("MONARCH_CY_PIN_GPUS")


def gpu_coord() -> int | None:
    return get("MONARCH_CY_GPU_COORD")


def gpu_unpinned() -> str | None:
    return get("MONARCH_CY_GPU_UNPINNED")


def heartbeat_timeout() -> float:
    return get("MONARCH_CY_HEARTBEAT_TIMEOUT")


def run_dir() -> str | None:
    return get("MONARCH_CY_RUN_DIR")


def cast_fanout() -> int:
    return get("MONARCH_CY_CAST_FANOUT")


def cast_nogil() -> bool:
    return get("MONARCH_CY_CAST_NOGIL")


def interleave() -> bool:
    return get("MONARCH_CY_INTERLEAVE")


def supervise_timeout() -> float:
    return get("MONARCH_CY_SUPERVISE_TIMEOUT")


def cleanup_timeout() -> float:
    return get("MONARCH_CY_CLEANUP_TIMEOUT")


def max_message_bytes() -> int:
    return get("MONARCH_CY_MAX_MESSAGE_BYTES")


def rdma_ibverbs_target() -> str | None:
    return get("MONARCH_CY_RDMA_IBVERBS_TARGET")


def monarch_config() -> str | None:
    return get("MONARCH_CY_MONARCH_CONFIG")


def fault_grace() -> float:
    return get("MONARCH_CY_FAULT_GRACE")


def fault_hook_skips_seen() -> bool:
    return get("MONARCH_CY_FAULT_HOOK_SKIPS_SEEN")


def log_level() -> str | None:
    return get("MONARCH_CY_LOG_LEVEL")


def telemetry() -> bool:
    return get("MONARCH_CY_TELEMETRY")


def telemetry_otlp_endpoint() -> str | None:
    return get("MONARCH_CY_TELEMETRY_OTLP_ENDPOINT")


def keep_failed_logs() -> bool:
    return get("MONARCH_CY_KEEP_FAILED_LOGS")


def tail_log_lines() -> int | None:
    """The number set; None when unset (the caller decides: 20, or 0 under compat)."""
    return get("MONARCH_CY_TAIL_LOG_LINES")


def debug_console() -> str:
    return get("MONARCH_CY_DEBUG_CONSOLE")


def rank() -> int | None:
    return get("MONARCH_CY_RANK")


def world_size() -> int | None:
    return get("MONARCH_CY_WORLD_SIZE")


def markdown_table() -> str:
    """The table of ``docs/configuration.md``, one row per variable."""
    rows = ["| Variable | Type | Default | Set by | Meaning |", "|---|---|---|---|---|"]
    for v in VARIABLES.values():
        rows.append(f"| `{v.name}` | {v.type_text()} | {v.default_text()} | {v.who} | "
                    f"{v.meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
