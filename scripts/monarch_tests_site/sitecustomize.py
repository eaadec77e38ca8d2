"""Placeholders for Monarch's Rust internals, for running Monarch's own tests on monarch_cy.

It also installs :mod:`monarch_cy.compat` in every Python process started with this
folder on its path (see the end of :func:`_register`).

Only ``scripts/monarch_tests.py`` puts this folder on ``PYTHONPATH`` (for the monarch_cy
run, in the test process and every proc it starts).  Monarch's test files import, at
module level, names from its native extension that exist only to test the extension
itself (tokio tasks, mailbox ids, message buffers, pickling counters, the control
plane's GIL counter, Rust-made test structs).  Without them a
whole file fails to collect, and the public-surface tests in it never run.  Each name
below becomes a placeholder: it can be imported (and subclassed), and making or calling one raises
``NotImplementedError`` naming it, so a test that really exercises it fails with that
line in the runner's report (never passes by accident).

The list is closed: a name monarch_cy provides for real belongs in
``monarch_cy/compat/_paths.py``, not here.  docs/monarch-compat.md lists these.
"""

from __future__ import annotations

_RB = "monarch._rust_bindings"
_HY = _RB + ".monarch_hyperactor"

#: Monarch module -> the Rust-internal names its tests import from it.
PLACEHOLDERS = {
    _RB + ".monarch_extension": (),
    _RB + ".monarch_extension.panic": ("panicking_function",),
    _HY + ".actor": ("PythonMessage", "PythonMessageKind"),
    _HY + ".buffers": ("Buffer",),
    _HY + ".mailbox": ("PortId", "PortRef", "UndeliverableMessageEnvelope"),
    _HY + ".pickle": ("_get_mesh_pop_count", "_get_pending_reserve_count",
                      "_reset_mesh_pop_count", "_reset_pending_reserve_count"),
    _HY + ".proc": ("ActorAddr",),
    _HY + ".proc_mesh": ("ProcMesh",),
    _HY + ".pytokio": ("Handle", "WouldBlockRuntime", "is_tokio_thread"),
    _HY + ".testing": ("_PROBE_SUCCESS_VALUE", "_make_handle_probe", "_make_test_struct"),
    _HY + ".runtime": ("_force_unsanctioned_gil_on_control_plane",
                       "_get_gil_on_control_plane", "_reset_gil_on_control_plane"),
    _HY + ".value_mesh": ("_make_test_value_mesh",),
    _RB + ".rdma": ("_RdmaManager",),
}

#: Private names of Monarch's Python implementation that test files import at module
#: level and that have no monarch_cy counterpart (its mesh-admin, log-forwarding and
#: pickling machinery, the debugger's source loader, the job sidecar and
#: mounts).  Same treatment.
PYTHON_INTERNALS = {
    "monarch._src.actor.logging": ("_pending_flush_tasks",),
    # the debugger's fetch of the controller's source for code pickled by value
    "monarch._src.actor.source_loader": ("SourceLoaderController",),
    # how Python methods are patched onto Rust (PyO3) classes, and its test classes
    "monarch._src.actor.python_extension_methods": ("PatchRustClass",),
    "monarch._src.actor.testing": ("PlainMixin", "TestStruct", "TraitMixin"),
    "monarch._src.actor.mpsc": ("Receiver",),
    "monarch._src.actor.proc_mesh": ("HyProcMesh",),
    "monarch._src.job._job_sidecar_worker": (),
    "monarch._src.job.job_sidecar": (),
    "monarch._src.job.job_components": ("JobComponent", "JobComponents", "MountComponent"),
    "monarch._src.job.mount_config": ("Mounts",),
    "monarch._src.job.process_guard": ("_Shutdown", "_wait_for_socket"),
    "monarch._src.job.meta": (),
    "monarch._src.job.meta.mast": ("MASTJob",),
    "monarch._src.job.job": ("MeshAdminConfig",),
    "monarch._src.rdma.rdma": ("_make_local_memory_handle_from_tensor",),
    "monarch._src.spmd.host_mesh": ("_IN_PAR", "_spawn_worker_process", "_worker_addr_key",
                                   "host_mesh_from_store"),
    "monarch.tools.config": ("Config",),
    "monarch.tools.config.workspace": ("Workspace",),
}

#: Names of Monarch's that monarch_cy does not provide yet (docs/monarch-compat.md says
#: so for each).  Same treatment, so that the rest of a file that imports one runs.
NOT_YET = {
}


def _placeholder(path: str) -> type:
    def refuse(*_a, **_k):
        raise NotImplementedError(
            f"{path} is a Rust internal of Monarch; under scripts/monarch_tests.py it is "
            "a placeholder that only imports")
    return type(path.rsplit(".", 1)[-1], (), {
        "__new__": lambda cls, *a, **k: refuse(),
        "__module__": path.rsplit(".", 1)[0], "__doc__": f"placeholder for {path}"})


def _register() -> None:
    try:
        from monarch_cy.compat import _paths
    except ImportError:       # not the monarch_cy venv: nothing to do
        return
    fallbacks: dict = {}
    for module, names in [*PLACEHOLDERS.items(), *PYTHON_INTERNALS.items(),
                          *NOT_YET.items()]:
        _paths.SHIMS.setdefault(module, {})
        fallbacks.setdefault(module, {}).update(
            {n: _placeholder(f"{module}.{n}") for n in names})
    make_shim = _paths.make_shim

    def make_shim_with_placeholders(fullname: str):
        """compat's shim, then a placeholder for each listed name it does not hold."""
        mod = make_shim(fullname)
        for name, obj in fallbacks.get(fullname, {}).items():
            if name not in mod.__dict__:
                mod.__dict__[name] = obj
        return mod

    _paths.make_shim = make_shim_with_placeholders
    # Every Python process of the run is a Monarch program on monarch_cy, as the test
    # process is (``python -m monarch_cy.compat -m pytest``): Monarch's tests also start
    # plain ``python helper.py`` children (isolate_in_subprocess, worker binaries).
    from monarch_cy import compat
    compat.install()


_register()
