"""Every ``monarch.*`` module path :mod:`monarch_cy.compat` resolves, in one table each.

* :data:`ALIASES` -- Monarch module -> the monarch_cy module that *is* it
  (``monarch.actor is monarch_cy.actor``).
* :data:`SHIMS` -- Monarch module (mostly private ones that libraries import) -> its
  names, each ``"module"`` (same name there) or ``"module:attr"``.  The module made
  for it holds exactly the names whose target exists now; another of its names
  (listed, not provided yet) raises an ``ImportError`` (``from ... import``) or
  ``AttributeError`` naming it.
* :data:`PREFER` -- for a shim, a monarch_cy module that replaces it as an alias once
  it exists (``monarch.job.kubernetes`` -> ``monarch_cy.job.kubernetes``).
* :data:`PACKAGES` -- empty packages on the way to the leaves (``monarch._src``...).
* :data:`DEPRECATED` -- paths Monarch itself deprecates; importing one warns as
  Monarch's does.

Any other ``monarch.*`` path raises :class:`ModuleNotProvidedError`.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings

from monarch_cy._errors import ModuleNotProvidedError, NameNotProvidedError

__all__ = ["ALIASES", "SHIMS", "PREFER", "PACKAGES", "DEPRECATED", "ModuleNotProvidedError",
           "NameNotProvidedError", "module_paths", "not_provided", "make_shim", "DOC"]

DOC = "docs/monarch-compat.md"

_A = "monarch_cy.actor"
_J = "monarch_cy.job"
_R = "monarch_cy.rdma"
_S = "monarch_cy.spmd"
_C = "monarch_cy.config"
_T = "monarch_cy.telemetry"
_P = "monarch_cy.compat._private"
_DBG = "monarch_cy._debug."

ALIASES = {
    "monarch": "monarch_cy.compat._monarch",
    "monarch.actor": _A,
    "monarch.rdma": _R,
    "monarch.job": _J,
    "monarch.spmd": _S,
    "monarch.config": _C,
    "monarch.tools.network": "monarch_cy.compat._network",
}

_ACTOR_MESH = {n: _A for n in (
    "Accumulator", "Actor", "ActorError", "ActorMesh", "Channel", "Context", "Point",
    "Port", "PortReceiver", "ValueMesh", "as_endpoint", "attach", "context",
    "current_actor_name", "current_rank", "current_size", "enable_transport",
    "endpoint", "send", "shutdown_context")}
_ACTOR_MESH.update({"_context": f"{_P}:context_var", "IN_PAR": f"{_P}:IN_PAR",
                    "_client_context": "monarch_cy._actor.model.actor:client_context",
                    "Instance": "monarch_cy._actor.model.actor:ActorInstance"})
_PROC_MESH = {"ProcMesh": _A, "get_or_spawn_controller": _A}
_PROC_MESH.update({n: "monarch_cy._actor.meshes.spawn_hooks" for n in (
    "register_proc_mesh_spawn_callback", "unregister_proc_mesh_spawn_callback")})
_RDMA = {n: _R for n in (
    "RDMAAction", "RDMABuffer", "RDMAReadTransferWarning", "RDMATcpFallbackWarning",
    "RDMAWriteTransferWarning", "get_rdma_backend", "is_ibverbs_available",
    "is_rdma_available")}
_CONFIG = {n: _C for n in ("Encoding", "clear_runtime_config", "configure",
                           "get_global_config", "get_runtime_config")}

SHIMS = {
    # -- the actor API's private homes
    "monarch._src.actor.actor_mesh": _ACTOR_MESH,
    "monarch._src.actor.endpoint": {
        "Endpoint": _A, "endpoint": _A,
        "EndpointProperty": "monarch_cy._actor.model.endpoint:EndpointProperty"},
    "monarch._src.actor.proc_mesh": _PROC_MESH,
    "monarch._src.actor.host_mesh": {
        "HostMesh": _A, "this_host": _A, "this_proc": _A, "default_bootstrap_cmd": _A,
        "_spawn_admin": "monarch_cy._hosts.mesh_admin:spawn_admin"},
    "monarch._src.actor.future": {"Future": _A},
    "monarch._src.actor.shape": {"Extent": _A, "Point": _A,
                                 "ShapeExt": "monarch_cy.compat._shape",
                                 "MeshTrait": "monarch_cy.compat._shape",
                                 "Shape": "monarch_cy.compat._shape",
                                 "NDSlice": "monarch_cy.compat._shape:Slice",
                                 "Slice": "monarch_cy.compat._shape"},
    "monarch._src.actor.supervision": {"unhandled_fault_hook": _A},
    "monarch._src.actor.concurrent": {"concurrent_endpoint": _A},
    "monarch._src.actor.bootstrap": {n: _A for n in (
        "attach_to_workers", "run_worker_loop_forever", "run_worker_loop_until_shutdown",
        "start_worker_loop_forever")},
    "monarch._src.actor.telemetry": {"TracingForwarder": _P, "get_meter": _T, "span": _T,
                                     "traced": _T, **{n: "monarch_cy._telemetry."
                                                      "named_instruments" for n in (
                                         "Counter", "UpDownCounter", "Histogram")}},
    "monarch._src.actor.mock": {"patch_actor": _P, "get_actor_class": _P},
    # -- the debugger (docs/observability.md, "Debugger")
    "monarch._src.actor.debugger.debug_command": {n: _DBG + "commands" for n in (
        "Attach", "Cast", "Continue", "DebugCommand", "Help", "ListCommand", "Quit",
        "RanksType")},
    "monarch._src.actor.debugger.debug_controller": {
        "DebugController": _DBG + "controller", "debug_controller": _DBG + "controller"},
    "monarch._src.actor.debugger.debug_io": {n: _DBG + "debug_io" for n in (
        "DebugIO", "DebugIOError", "DebugStdIO")},
    "monarch._src.actor.debugger.debug_session": {n: _DBG + "sessions" for n in (
        "DebugSession", "DebugSessionInfo", "DebugSessions")},
    "monarch.tools.debug_env": {n: f"{_DBG}server:{n}" for n in (
        "_MONARCH_DEBUG_SERVER_HOST_ENV_VAR", "_MONARCH_DEBUG_SERVER_PORT_ENV_VAR",
        "_MONARCH_DEBUG_SERVER_HOST_DEFAULT")},
    "monarch._src.actor.pickle": {n: "monarch_cy.compat._pickle" for n in (
        "flatten", "unflatten")},
    # -- jobs (names resolve to whatever monarch_cy.job provides)
    "monarch._src.job.job": {**{n: _J for n in (
        "DEFAULT_JOB_PATH", "JobState", "JobTrait", "LocalJob", "TelemetryConfig",
        "exec_command", "job_load", "job_loads", "load_current_job", "set_current_job")},
        "BatchJob": "monarch_cy._hosts.local_jobs:BatchJob",
        "BashActor": "monarch_cy._hosts.exec_command:BashActor",
        "LoginJob": "monarch_cy._hosts.login_job:LoginJob",
        "ProcessState": "monarch_cy._hosts.job:ProcessState"},
    "monarch._src.job.job_state": {"JobState": _J},
    "monarch._src.job.telemetry_config": {"TelemetryConfig": _J},
    "monarch._src.job.kubernetes": {
        "ImageSpec": _J, "KubeConfig": _J, "KubernetesJob": _J,
        "_WORKER_BOOTSTRAP_SCRIPT": f"{_P}:WORKER_BOOTSTRAP_SCRIPT"},
    "monarch._src.job.slurm": {"SlurmJob": _J},
    "monarch._src.job.process": {"ProcessJob": _J},
    "monarch._src.job.spmd": {**{n: "monarch_cy.job.spmd" for n in (
        "SPMDJob", "StoreJob", "serve")},
        "_parse_torchrun": "monarch_cy._hosts.spmd_job:parse_torchrun"},
    "monarch._src.tools.commands": {"load_current_job": _J},
    "monarch.job.kubernetes": {"ImageSpec": _J, "KubeConfig": _J, "KubernetesJob": _J},
    "monarch.job.spmd": {"SPMDJob": _J, "StoreJob": _J, "serve": _J},
    # -- RDMA, SPMD
    "monarch._src.rdma": _RDMA,
    "monarch._src.rdma.rdma": _RDMA,
    "monarch._src.spmd": {n: _S for n in (
        "SPMDActor", "setup_torch_elastic_env", "setup_torch_elastic_env_async")},
    "monarch._src.spmd.actor": {"SPMDActor": _S},
    # -- the native extension's Python-visible types that programs import
    "monarch._rust_bindings.monarch_hyperactor.channel": {
        "ChannelTransport": _C, "BindSpec": "monarch_cy._config_transport"},
    "monarch._rust_bindings.rdma": {"RdmaInitError": _R},
    "monarch._rust_bindings.monarch_hyperactor.config": _CONFIG,
    "monarch._rust_bindings.monarch_hyperactor.supervision": {
        "SupervisionError": _A, "MeshFailure": _A},
    "monarch._rust_bindings.monarch_hyperactor.host_mesh": {"BootstrapCommand": _A},
    "monarch._rust_bindings.monarch_hyperactor.pytokio": {
        n: "monarch_cy.compat._pytokio" for n in ("PythonTask", "Shared")},
    "monarch._rust_bindings.monarch_hyperactor.actor_mesh": {
        "hold_gil_for_test": f"{_P}:hold_gil_for_test"},
    "monarch._rust_bindings.monarch_hyperactor.shape": {
        "Point": _A, "Extent": _A, "Shape": "monarch_cy.compat._shape",
        "Slice": "monarch_cy.compat._shape"},
    # -- Monarch's deprecated public aliases, and monarch.actor.concurrent
    "monarch.actor_mesh": _ACTOR_MESH,
    "monarch.proc_mesh": _PROC_MESH,
    "monarch.actor.concurrent": {"concurrent_endpoint": _A},
}

PREFER = {
    "monarch.job.kubernetes": "monarch_cy.job.kubernetes",
    "monarch.job.spmd": "monarch_cy.job.spmd",
}

PACKAGES = ("monarch._src", "monarch._src.actor", "monarch._src.actor.debugger",
            "monarch._src.job", "monarch._src.tools",
            "monarch.tools", "monarch._rust_bindings",
            "monarch._rust_bindings.monarch_hyperactor")

DEPRECATED = {
    "monarch.actor_mesh": "monarch.actor_mesh is deprecated, please import from "
                          "monarch.actor instead.",
    "monarch.proc_mesh": "monarch.proc_mesh is deprecated, please import from "
                         "monarch.actor instead.",
}

# Public modules of Monarch that belong to its tensor engine (not provided).
_TENSOR_ENGINE = (
    "monarch.tensor_engine", "monarch.common", "monarch.fetch", "monarch.remote_class",
    "monarch.controller", "monarch.worker", "monarch.simulator", "monarch.gradient",
    "monarch.gradient_generator", "monarch.mesh_controller", "monarch.opaque_module",
    "monarch.opaque_object", "monarch.cached_remote_function", "monarch.world_mesh",
    "monarch.rust_backend_mesh", "monarch.python_local_mesh", "monarch.builtins",
    "monarch.parallel", "monarch.random", "monarch.memory", "monarch.profiler",
    "monarch.safe_torch", "monarch.timer", "monarch._src.tensor_engine")

PUBLIC = ("monarch", "monarch.actor", "monarch.rdma", "monarch.job", "monarch.job.kubernetes",
          "monarch.job.spmd", "monarch.spmd", "monarch.config", "monarch.tools.network")


def module_paths() -> list:
    """Every path resolved, sorted."""
    return sorted(set(ALIASES) | set(SHIMS) | set(PACKAGES))


def not_provided(fullname: str) -> ModuleNotProvidedError:
    private = any(part.startswith("_") for part in fullname.split(".")[1:])
    if any(fullname == t or fullname.startswith(t + ".") for t in _TENSOR_ENGINE):
        what = "is part of Monarch's tensor engine, which monarch_cy does not provide"
    elif private:
        what = "is a Monarch internal that monarch_cy does not provide"
    else:
        what = "is a Monarch module that monarch_cy does not provide"
    return ModuleNotProvidedError(
        f"No module named {fullname!r}: {fullname} {what}. monarch_cy's Monarch "
        f"compatibility layer provides Monarch's public modules ({', '.join(PUBLIC)}) "
        "and the private paths that Monarch's examples and libraries built on it "
        f"import; {DOC} ('Module paths') lists them and what each maps to.",
        name=fullname)


def _in_import_from() -> bool:
    """Whether the frame two levels up is running ``from m import name`` (so that a
    module ``__getattr__`` may raise ImportError, with its own message, instead of
    the AttributeError that ``getattr``/``hasattr`` expect)."""
    import dis
    try:
        f = sys._getframe(2)
        return f.f_code.co_code[f.f_lasti] == dis.opmap["IMPORT_FROM"]
    except (ValueError, IndexError, AttributeError, KeyError):
        return False


def _resolve(spec: str, name: str):
    mod_name, _, attr = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name and (mod_name == e.name or mod_name.startswith(e.name + ".")):
            raise AttributeError(name) from None
        raise
    return getattr(mod, attr or name)


def make_shim(fullname: str) -> types.ModuleType:
    """The module for ``fullname``: a package (submodules resolve through the compat
    finder) holding the names of ``SHIMS[fullname]`` that exist now."""
    names = SHIMS.get(fullname, {})
    mod = types.ModuleType(fullname)
    mod.__doc__ = (f"{fullname} under monarch_cy.compat: " + (
        ", ".join(f"{n} -> {s.replace(':', '.') if ':' in s else s + '.' + n}"
                  for n, s in names.items()) or "a package") + f" (see {DOC}).")
    mod.__path__ = []
    mod.__monarch_cy_compat__ = True
    present = []
    for name, spec in names.items():
        try:
            mod.__dict__[name] = _resolve(spec, name)
        except AttributeError:
            continue
        present.append(name)
    mod.__all__ = [n for n in present if not n.startswith("_")]
    missing = [n for n in names if n not in present]

    def __getattr__(name: str):
        if name in missing:
            msg = (f"cannot import name {name!r} from {fullname!r}: monarch_cy provides "
                   f"{fullname} but not {name} (yet); see {DOC}")
        else:
            msg = f"module {fullname!r} has no attribute {name!r}"
            if name.startswith("__") or not names:
                raise AttributeError(msg)
            msg += (f" (monarch_cy provides {', '.join(present) or 'no names'} there; "
                    f"see {DOC})")
        if _in_import_from():
            raise NameNotProvidedError(msg, name=fullname)
        raise AttributeError(msg)

    mod.__getattr__ = __getattr__
    return mod


def prefer(fullname: str) -> str | None:
    """The monarch_cy module that replaces shim ``fullname``, when it exists."""
    target = PREFER.get(fullname)
    if target is None:
        return None
    import importlib.util
    try:
        return target if importlib.util.find_spec(target) is not None else None
    except ImportError:
        return None


def warn_deprecated(fullname: str) -> None:
    msg = DEPRECATED.get(fullname)
    if msg is not None:
        warnings.warn(msg, DeprecationWarning, stacklevel=4)
