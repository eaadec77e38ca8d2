"""Names of Monarch's private modules that programs and libraries use, beside the
actor API: a mesh of one's own on ``MeshTrait`` (its algebra and errors), the named
telemetry instruments' contract with their backend (``inner``: amounts as ints,
attribute keys and values as strings), ``ValueMesh[T]`` at run time, and
``actor_id.actor_name`` inside an actor and in the client.  With the argument
``algebra_differences``: only what monarch_cy's mesh algebra does otherwise (a split
that does not divide, a uniformly strided mesh flattened)."""

import sys
from unittest.mock import MagicMock

import monarch.actor
from _obs import obs, record_hook, report_hook, step  # noqa: E402

monarch.actor.unhandled_fault_hook = record_hook

from monarch._src.actor.actor_mesh import ValueMesh, context  # noqa: E402
from monarch._src.actor.shape import MeshTrait, NDSlice, Shape, Slice  # noqa: E402
from monarch._src.actor.telemetry import Counter, UpDownCounter  # noqa: E402
from monarch.actor import Actor, endpoint, this_host  # noqa: E402


class Grid(MeshTrait):
    def __init__(self, shape):
        self._shape = shape

    def _new_with_shape(self, shape):
        return Grid(shape)

    @property
    def _ndslice(self) -> NDSlice:
        return self._shape.ndslice

    @property
    def _labels(self):
        return self._shape.labels


def desc(g):
    nd = g._ndslice
    return {"labels": list(g._labels), "offset": nd.offset, "sizes": list(nd.sizes),
            "strides": list(nd.strides), "len": len(g)}


g = Grid(Shape(["host", "gpu"], Slice(offset=0, sizes=[2, 4], strides=[4, 1])))
obs("grid", {**desc(g), "sizes_prop": g.sizes, "size": g.size(), "size_gpu": g.size("gpu"),
             "size_both": g.size(["host", "gpu"]), "extent": str(g.extent)})
step("slice_int", lambda: desc(g.slice(host=1)))
step("slice_range", lambda: desc(g.slice(gpu=slice(1, 3))))
step("flatten", lambda: desc(g.flatten("rank")))
step("rename", lambda: desc(g.rename(host="node")))
step("split", lambda: desc(g.split(gpu=("dp", "tp"), tp=2)))
try:
    g.size("nope")
except KeyError as e:
    obs("size_missing", ["KeyError", str(e).endswith("does not have dimension 'nope'\"")])
if sys.argv[1:] == ["algebra_differences"]:
    step("split_uneven", lambda: desc(g.split(gpu=("dp", "tp"), tp=3)))
    step("flatten_strided", lambda: desc(g.slice(gpu=slice(0, 4, 2)).flatten("r")))
    sys.exit(0)

for cls in (Counter, UpDownCounter):
    c = cls("requests")
    c.inner = MagicMock()
    c.add(3.7, attributes={"method": "ping", "n": 5})
    c.add(-1 if cls is UpDownCounter else 2)
    obs(cls.__name__, [[list(a.args), a.kwargs] for a in c.inner.add.call_args_list])

obs("value_mesh_subscript_is_class", ValueMesh[int] is ValueMesh)


class Who(Actor):
    @endpoint
    def who(self):
        aid = context().actor_instance.actor_id
        return aid.actor_name


pm = this_host().spawn_procs(per_host={"gpus": 2})
w = pm.spawn("named_worker", Who)
vm = w.who.call().get(timeout=30)
obs("actor_names", vm.values())
obs("isinstance_value_mesh_int", isinstance(vm, ValueMesh[int]))
obs("client_actor_name", context().actor_instance.actor_id.actor_name)
pm.stop().get(timeout=30)
report_hook()
