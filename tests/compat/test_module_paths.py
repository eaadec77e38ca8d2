"""Every ``monarch.*`` module path that Monarch programs and libraries import resolves
under monarch_cy.compat to working equivalents; any other path fails with an
ImportError that names it and points to the docs."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import monarch_cy.actor
import monarch_cy.compat as compat
import monarch_cy.config
import monarch_cy.job
import monarch_cy.rdma
import monarch_cy.spmd
from monarch_cy.compat import _paths

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# ``from <module> import <names>`` lines found in Monarch's examples (python/examples,
# docs/source/examples, examples/) and in torchstore, for the paths monarch_cy
# provides, with the names it provides there.
LIBRARY_IMPORTS = {
    "monarch._src.actor.actor_mesh": ["ActorMesh", "Channel", "Port", "PortReceiver",
                                      "_context", "context"],
    "monarch._src.actor.bootstrap": ["attach_to_workers"],
    "monarch._src.actor.mock": ["patch_actor"],
    "monarch._src.actor.telemetry": ["TracingForwarder"],
    "monarch._src.actor.endpoint": ["EndpointProperty"],
    "monarch._src.job.job": ["JobState", "JobTrait"],
    "monarch._src.job.kubernetes": ["_WORKER_BOOTSTRAP_SCRIPT"],
    "monarch._rust_bindings.monarch_hyperactor.channel": ["ChannelTransport"],
    "monarch.config": ["ChannelTransport", "configure"],
    "monarch.tools.network": ["AddrType"],
    "monarch.job.kubernetes": ["KubernetesJob"],
    "monarch.rdma": ["RDMAAction", "RDMABuffer", "is_ibverbs_available",
                     "is_rdma_available"],
    "monarch.spmd": ["SPMDActor", "setup_torch_elastic_env_async"],
    "monarch.actor": ["Actor", "ProcMesh", "current_rank", "endpoint",
                      "get_or_spawn_controller", "shutdown_context", "this_host"],
}


@pytest.fixture()
def on():
    compat.uninstall()
    compat.install()
    yield compat
    compat.uninstall()


def _run(code: str, timeout: int = 90):
    old = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + ([old] if old else [])))
    r = subprocess.run([sys.executable, "-m", "monarch_cy.compat", "-c",
                        textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


# -- every path resolves --------------------------------------------------------------

@pytest.mark.parametrize("path", _paths.module_paths())
def test_every_listed_path_imports(on, path):
    import importlib
    mod = importlib.import_module(path)
    assert sys.modules[path] is mod
    if path in _paths.ALIASES:
        assert mod is importlib.import_module(_paths.ALIASES[path])
    for name in getattr(mod, "__all__", ()):
        assert getattr(mod, name) is not None


@pytest.mark.parametrize("module", sorted(LIBRARY_IMPORTS))
def test_library_imports_resolve(on, module):
    ns: dict = {}
    exec(f"from {module} import {', '.join(LIBRARY_IMPORTS[module])}", ns)
    for name in LIBRARY_IMPORTS[module]:
        assert ns[name] is not None


def test_public_modules_are_monarch_cy_modules(on):
    import monarch
    import monarch.config
    import monarch.job.kubernetes
    import monarch.tools.network
    assert monarch.config is monarch_cy.config
    assert monarch.configure is monarch_cy.config.configure
    assert monarch.get_global_config is monarch_cy.config.get_global_config
    assert monarch.job.kubernetes.KubernetesJob is monarch_cy.job.KubernetesJob
    assert monarch.tools.network.AddrType is monarch_cy.spmd.AddrType


def test_private_actor_names_are_ours(on):
    from monarch._src.actor.actor_mesh import (Actor, ActorMesh, Channel, Port,
                                               PortReceiver, ValueMesh, context)
    from monarch._src.actor.bootstrap import attach_to_workers
    from monarch._src.actor.endpoint import Endpoint, EndpointProperty, endpoint
    from monarch._src.actor.future import Future
    from monarch._src.actor.host_mesh import HostMesh, this_host
    from monarch._src.actor.proc_mesh import ProcMesh, get_or_spawn_controller
    from monarch._src.actor.shape import Extent, Point
    from monarch._src.job.job import JobState, JobTrait
    from monarch._src.rdma.rdma import RDMABuffer
    from monarch._rust_bindings.monarch_hyperactor.supervision import SupervisionError
    a = monarch_cy.actor
    assert (Actor, ActorMesh, Channel, Port, PortReceiver, ValueMesh, context) == (
        a.Actor, a.ActorMesh, a.Channel, a.Port, a.PortReceiver, a.ValueMesh, a.context)
    assert attach_to_workers is a.attach_to_workers
    assert (Endpoint, endpoint, Future, HostMesh, this_host, ProcMesh) == (
        a.Endpoint, a.endpoint, a.Future, a.HostMesh, a.this_host, a.ProcMesh)
    assert get_or_spawn_controller is a.get_or_spawn_controller
    assert (Extent, Point, SupervisionError) == (a.Extent, a.Point, a.SupervisionError)
    assert (JobState, JobTrait) == (monarch_cy.job.JobState, monarch_cy.job.JobTrait)
    assert RDMABuffer is monarch_cy.rdma.RDMABuffer

    class Greeter(Actor):
        @endpoint
        def hi(self) -> str:
            return "hi"

    # what @endpoint puts on the class is the EndpointProperty of this path
    assert isinstance(Greeter.__dict__["hi"], EndpointProperty)


def test_channel_transport_is_one_enum(on):
    from monarch._rust_bindings.monarch_hyperactor.channel import ChannelTransport
    from monarch.config import ChannelTransport as FromConfig
    assert ChannelTransport is FromConfig is monarch_cy.config.ChannelTransport
    assert ChannelTransport.TcpWithHostname.value == "tcp(hostname)"


def test_tracing_forwarder_is_a_working_handler(on):
    from monarch._src.actor.telemetry import TracingForwarder
    h = TracingForwarder()
    assert isinstance(h, logging.Handler)
    log = logging.getLogger("test_module_paths.tracing")
    log.propagate = False
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record)
    log.addHandler(h)
    log.addHandler(Keep())
    try:
        log.warning("hello %s", "there")
    finally:
        log.handlers.clear()
    # (a thread that used context() logs with Monarch's "[actor=<root>] " in front)
    assert seen[0].getMessage().removeprefix(
        getattr(seen[0], "actor_prefix", "")) == "hello there"
    assert seen[0].actor_id == monarch_cy.actor.current_actor_name()


def test_worker_bootstrap_script_runs_a_worker_loop(on):
    from monarch._src.job.kubernetes import _WORKER_BOOTSTRAP_SCRIPT
    compile(_WORKER_BOOTSTRAP_SCRIPT, "<bootstrap>", "exec")
    assert "run_worker_loop_forever" in _WORKER_BOOTSTRAP_SCRIPT
    assert "MONARCH_PORT" in _WORKER_BOOTSTRAP_SCRIPT
    assert hasattr(monarch_cy.actor, "run_worker_loop_forever")


def test_network_helpers(on):
    from monarch.tools.network import AddrType, get_ipaddr, get_sockaddr
    assert get_ipaddr("127.0.0.1", 80, AddrType.IPv4) == "127.0.0.1"
    assert get_sockaddr("127.0.0.1", 8080) == "127.0.0.1:8080"
    with pytest.raises(RuntimeError, match="Unable to resolve"):
        get_ipaddr("no-such-host.invalid", 80)


def test_deprecated_paths_warn(on):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        import monarch.actor_mesh
        import monarch.proc_mesh
    assert monarch.actor_mesh.ActorMesh is monarch_cy.actor.ActorMesh
    assert monarch.proc_mesh.ProcMesh is monarch_cy.actor.ProcMesh
    msgs = [str(x.message) for x in w if issubclass(x.category, DeprecationWarning)]
    assert any("monarch.actor_mesh is deprecated" in m for m in msgs)
    assert any("monarch.proc_mesh is deprecated" in m for m in msgs)


def test_uninstall_leaves_monarch_cy_modules_clean(on):
    import monarch.job.kubernetes  # noqa: F401 - sets .kubernetes on its parent
    import monarch.actor  # noqa: F401
    compat.uninstall()
    assert not [n for n in sys.modules if n == "monarch" or n.startswith("monarch.")]
    if "monarch_cy.job.kubernetes" not in sys.modules:
        assert "kubernetes" not in vars(monarch_cy.job)


# -- what is not provided --------------------------------------------------------------

@pytest.mark.parametrize("path,what", [
    ("monarch._src.actor.source_loader",
     "is a Monarch internal that monarch_cy does not provide"),
    ("monarch._src.actor.source_loader.x", "Monarch internal"),
    ("monarch._src.actor.debugger.breakpoint", "Monarch internal"),
    ("monarch._rust_bindings.monarch_extension", "Monarch internal"),
    ("monarch.common.tensor", "tensor engine"),
    ("monarch.fetch", "tensor engine"),
    ("monarch.job.meta", "is a Monarch module that monarch_cy does not provide"),
])
def test_unprovided_path_error(on, path, what):
    with pytest.raises(ModuleNotFoundError) as ei:
        __import__(path)
    e = ei.value
    assert isinstance(e, ImportError) and type(e) is _paths.ModuleNotProvidedError
    msg = str(e)
    # the first path of the chain that is not provided is the one named
    first = "monarch._src.actor.source_loader" if path.startswith(
        "monarch._src.actor.source_loader") else (
        "monarch.common" if path.startswith("monarch.common") else path)
    assert first in msg and what in msg
    assert "docs/monarch-compat.md" in msg
    assert e.name == first
    # the usual fallback pattern of libraries works
    try:
        exec(f"import {path}", {})
    except ImportError:
        pass


def test_name_not_provided_yet(on, monkeypatch):
    # a listed name whose monarch_cy home lacks it: clear errors both ways
    monkeypatch.setitem(_paths.SHIMS, "monarch._src.job.spmd",
                        {"serve": "monarch_cy.job:no_such_name_here"})
    sys.modules.pop("monarch._src.job.spmd", None)
    with pytest.raises(ImportError, match="provides monarch._src.job.spmd but not serve"):
        exec("from monarch._src.job.spmd import serve", {})
    import monarch._src.job.spmd as m
    assert not hasattr(m, "serve")
    with pytest.raises(AttributeError, match="not serve"):
        m.serve  # noqa: B018
    assert getattr(m, "other", 7) == 7


# -- semantics that libraries rely on ---------------------------------------------------

def test_context_var_is_none_until_monarch_runs():
    out = _run("""
        from monarch._src.actor import actor_mesh
        from monarch.actor import Actor, endpoint, this_host, current_actor_name

        class Probe(Actor):
            @endpoint
            def ctx(self):
                c = actor_mesh._context.get()
                return c is not None and str(c.actor_instance.actor_id) == current_actor_name()

        print("before", actor_mesh._context.get(), actor_mesh._context.get("dflt"))
        procs = this_host().spawn_procs(per_host={"procs": 1})
        print("actor", procs.spawn("p", Probe).ctx.call_one().get())
        print("client", actor_mesh._context.get() is not None)
        procs.stop().get()
    """)
    assert "before None dflt" in out
    assert "actor True" in out
    assert "client True" in out


class Real(monarch_cy.actor.Actor):
    @monarch_cy.actor.endpoint
    def who(self) -> str:
        return "real"


class Mock(monarch_cy.actor.Actor):
    @monarch_cy.actor.endpoint
    def who(self) -> str:
        return "mock"


class Mock2(monarch_cy.actor.Actor):
    @monarch_cy.actor.endpoint
    def who(self) -> str:
        return "mock2"


def test_patch_actor(on, procs):
    from monarch._src.actor.mock import patch_actor

    def who(name):
        return procs.spawn(name, Real).slice(procs=0).who.call_one().get(20)

    assert who("r0") == "real"
    with patch_actor(Real, Mock) as m:
        assert m is Mock
        assert who("r1") == "mock"
        with patch_actor(Real, Mock2):
            assert who("r2") == "mock2"
        assert who("r3") == "mock"               # the outer patch is back
    assert who("r4") == "real"

    @patch_actor(Real, Mock)
    def decorated():
        return who("r5")
    assert decorated() == "mock" and who("r6") == "real"

    @patch_actor(Real, Mock2)
    async def decorated_async():
        return who("r7")
    assert asyncio.run(decorated_async()) == "mock2" and who("r8") == "real"
