"""Serialization as in Monarch: cloudpickle (by value for what the other side cannot
import), torch's own tensor pickling with storage bytes out of band, and errors that
name the culprit.  Checked at the wire level (no procs) and through real calls."""

from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
import threading
import time
import types

import pytest

from monarch_cy._transport import wire
from monarch_cy._errors import ActorError
from monarch_cy.actor import Actor, endpoint, this_host

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rt(obj):
    data, bufs = wire.dumps(obj)
    return pickle.loads(data, buffers=bufs)


def double(x):
    return 2 * x


class Unloadable:
    """Pickles fine; fails to unpickle (its rebuild function raises)."""

    def __reduce__(self):
        return (_explode, ("cannot rebuild me here",))


def _explode(msg):
    raise ValueError(msg)


class Oops(Exception):
    """Rebuilds in a worker (so it is sent as the remote exception), not in the
    controller."""

    def __reduce__(self):
        return (_oops_in_worker_only, self.args)


def _oops_in_worker_only(msg):
    from monarch_cy._transport.current import current_node
    node = current_node()
    if node is not None and node.is_controller:
        raise ValueError(f"controller refuses to rebuild: {msg}")
    return Oops(msg)


class BadReduce:
    def __reduce__(self):
        raise ValueError("no reduction for you")


class Chain:
    def __init__(self, nxt):
        self.nxt = nxt


def _deep(n=100_000):
    c = None
    for _ in range(n):
        c = Chain(c)
    return c


def _main_class():
    """A class the worker cannot import by name (as if defined in a script)."""
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return self.k * x
    Scaler.__module__ = "__main__"
    Scaler.__qualname__ = "Scaler"
    return Scaler


def _dynamic_class():
    return types.new_class("Dyn", (), {}, lambda ns: ns.update(
        {"__module__": "no_such_module_anywhere", "twice": lambda self, x: 2 * x}))


# -- wire level ----------------------------------------------------------------
def test_importable_function_goes_by_reference():
    data, bufs = wire.dumps(double)
    assert b"double" in data and len(data) < 120 and not bufs
    assert pickle.loads(data) is double


def test_lambda_closure_local_class_by_value_in_a_process_that_cannot_import_us():
    k = 7

    class Local:
        def __init__(self, v):
            self.v = v

        def get(self):
            return self.v + k

    Scaler, Dyn = _main_class(), _dynamic_class()
    payload = ((lambda x: x * 3, lambda x: x + k, Local(5), Scaler(4), Dyn()), {})
    data, bufs = wire.dumps(payload)
    assert not bufs
    code = ("import pickle, sys\n"
            "(f, g, loc, sc, dyn), _ = pickle.loads(sys.stdin.buffer.read())\n"
            "assert 'test_serialization' not in sys.modules\n"
            "print(f(2), g(1), loc.get(), sc.apply(3), dyn.twice(21))\n")
    env = dict(os.environ, PYTHONPATH=ROOT)     # monarch_cy, but not tests/compat
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                         env=env, cwd="/", timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.split() == [b"6", b"8", b"12", b"12", b"42"]


def test_main_module_class_is_rebuilt_by_value():
    Scaler = _main_class()
    data, _ = wire.dumps(Scaler(2))
    # by value: the class body (its method's code) is in the stream; in this process
    # cloudpickle maps it back to the class it came from
    assert b"apply" in data and len(data) > 300
    back = pickle.loads(data)
    assert type(back).__name__ == "Scaler" and back.apply(5) == 10


def test_rebound_name_falls_back_to_by_value():
    # Once pickled by reference, a function whose name is rebound in its module
    # must not fail: it now goes by value (what cloudpickle decides for it).
    mod = types.ModuleType("mcy_tmp_mod")
    exec("def f(x):\n    return x + 1\n", mod.__dict__)
    sys.modules[mod.__name__] = mod
    try:
        f = mod.f
        assert pickle.loads(wire.dumps(f)[0]) is f         # by reference
        exec("def f(x):\n    return x + 100\n", mod.__dict__)
        back = pickle.loads(wire.dumps(f)[0])
        assert back is not mod.f and back(1) == 2
    finally:
        del sys.modules[mod.__name__]


def test_register_pickle_by_value_is_honoured_after_caching():
    import cloudpickle
    mod = types.ModuleType("mcy_tmp_mod2")
    exec("def g(x):\n    return x * 10\n", mod.__dict__)
    sys.modules[mod.__name__] = mod
    try:
        g = mod.g
        assert pickle.loads(wire.dumps(g)[0]) is g
        cloudpickle.register_pickle_by_value(mod)
        try:
            back = pickle.loads(wire.dumps(g)[0])
            assert back is not g and back(2) == 20
        finally:
            cloudpickle.unregister_pickle_by_value(mod)
        assert pickle.loads(wire.dumps(g)[0]) is g
    finally:
        del sys.modules[mod.__name__]


def test_numpy_and_bytes_out_of_band_as_before():
    np = pytest.importorskip("numpy")
    a = np.arange(1 << 20, dtype=np.float32)
    data, bufs = wire.dumps(((a, np.ones(3)), {}))
    assert len(data) < 500 and [b.nbytes for b in bufs] == [a.nbytes]
    (a2, s), _ = pickle.loads(data, buffers=bufs)
    assert (a2 == a).all() and s.tolist() == [1.0, 1.0, 1.0]


def test_unpicklable_lock_names_its_type():
    with pytest.raises(TypeError, match=r"cannot pickle object of type _thread\.lock .*"
                                        r"TypeError: cannot pickle '_thread.lock'"):
        wire.dumps(((1, {"k": [threading.Lock()]}), {}))


def test_reduce_raising_value_error_becomes_type_error():
    with pytest.raises(TypeError, match=r"type test_serialization\.BadReduce .*"
                                        r"ValueError: no reduction for you") as ei:
        wire.dumps(((BadReduce(),), {}))
    assert isinstance(ei.value.__cause__, ValueError)


def test_deep_recursion_becomes_type_error():
    with pytest.raises(TypeError, match=r"type test_serialization\.Chain .*too deeply"):
        wire.dumps(((_deep(),), {}))
    nested = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(TypeError, match="too deeply"):
        wire.dumps(nested)
    assert wire.dumps(((1,), {}))[0] == pickle.dumps(((1,), {}), 5)   # still usable


def test_reentrant_and_threaded_dumps():
    class Reenter:
        def __reduce__(self):
            inner, _ = wire.dumps({"inner": [1, 2, 3]})
            return (pickle.loads, (inner,))
    assert _rt([Reenter(), 4]) == [{"inner": [1, 2, 3]}, 4]

    errors = []

    def work(i):
        try:
            for j in range(300):
                obj = ((i, j, lambda: i), {"x": [j] * (j % 5)})
                (a, b, f), kw = _rt(obj)
                assert (a, b, f(), kw) == (i, j, i, {"x": [j] * (j % 5)})
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_torch_not_imported_by_the_wire():
    code = ("import sys, pickle\n"
            "from monarch_cy._transport import wire\n"
            "import numpy\n"
            "d, b = wire.dumps(((numpy.ones(1 << 16), lambda: 1, {'a': 1}), {}))\n"
            "pickle.loads(d, buffers=b)\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=ROOT), cwd="/")
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.strip() == b"False"


# -- torch at the wire level --------------------------------------------------
def test_tensor_semantics_are_torchs():
    torch = pytest.importorskip("torch")
    m = torch.nn.Linear(4, 3)
    m2 = _rt(m)
    assert type(m2.weight) is torch.nn.Parameter and m2.weight.requires_grad
    assert torch.equal(m2.weight, m.weight) and torch.equal(m2.bias, m.bias)
    t = torch.arange(12.0).reshape(3, 4).T
    t2 = _rt(t)
    assert t2.stride() == (1, 4) and not t2.is_contiguous() and torch.equal(t2, t)
    cl = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    cl2 = _rt(cl)
    assert cl2.is_contiguous(memory_format=torch.channels_last) and torch.equal(cl2, cl)
    off = torch.arange(10)[3:7]
    off2 = _rt(off)
    assert off2.storage_offset() == 3 and off2.tolist() == [3, 4, 5, 6]
    g = torch.ones(3, requires_grad=True)
    assert _rt(g).requires_grad and not _rt(g.detach()).requires_grad
    bf = torch.ones(7, dtype=torch.bfloat16)
    assert _rt(bf).dtype == torch.bfloat16 and torch.equal(_rt(bf), bf)
    e = _rt((torch.empty(0), torch.empty(0, 3, dtype=torch.int64)))
    assert e[0].numel() == 0 and e[1].shape == (0, 3) and e[1].dtype == torch.int64


def test_views_in_one_message_share_one_storage():
    torch = pytest.importorskip("torch")
    base = torch.arange(12.0).reshape(3, 4)
    t, tail, tt, as_int = _rt((base, base[1:], base.T, base.view(torch.int32)))
    assert tail.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert as_int.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    tail[0, 0] = -1.0
    assert t[1, 0] == -1.0 and tt[0, 1] == -1.0
    # two separate messages do not alias
    a = _rt(base)
    b = _rt(base)
    a[0, 0] = 99.0
    assert b[0, 0] == 0.0 and base[0, 0] == 0.0


def test_large_tensor_out_of_band_small_in_band():
    torch = pytest.importorskip("torch")
    big = torch.randn(1 << 20)
    data, bufs = wire.dumps(((big, big[5:]), {}))
    assert len(data) < 1000
    assert [b.nbytes for b in bufs] == [big.untyped_storage().nbytes()]   # once
    (b1, b2), _ = pickle.loads(data, buffers=[bytearray(b) for b in bufs])
    assert torch.equal(b1, big) and b2.untyped_storage().data_ptr() == \
        b1.untyped_storage().data_ptr()
    small = torch.arange(4)
    data, bufs = wire.dumps(small)
    assert not bufs and torch.equal(pickle.loads(data), small)


def test_received_storage_is_the_buffer_zero_copy():
    torch = pytest.importorskip("torch")
    big = torch.zeros(1 << 16)
    data, bufs = wire.dumps(big)
    buf = bytearray(bufs[0])
    back = pickle.loads(data, buffers=[buf])
    back[0] = 1.5
    assert torch.frombuffer(buf, dtype=torch.float32)[0] == 1.5


# -- through real calls --------------------------------------------------------
class Ser(Actor):
    def __init__(self):
        self.kept = None

    @endpoint
    def apply(self, fn, *args):
        return fn(*args)

    @endpoint
    def echo(self, x):
        return x

    @endpoint
    def method(self, obj, name, *args):
        return getattr(obj, name)(*args)

    @endpoint
    def adder(self, n):
        return lambda x: x + n

    @endpoint
    def describe(self, t):
        import torch
        return (type(t).__name__, t.requires_grad, tuple(t.stride()),
                t.is_contiguous(memory_format=torch.channels_last), t.storage_offset())

    @endpoint
    def describe_module(self, m):
        import torch
        return [(n, type(p).__name__, isinstance(p, torch.nn.Parameter), p.requires_grad)
                for n, p in m.named_parameters()]

    @endpoint
    def poke_views(self, views):
        t, tail, tt = views
        tail[0, 0] = -1.0
        same = tail.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        return same, float(t[1, 0]), float(tt[0, 1]), views

    @endpoint
    def keep(self, t):
        self.kept = t
        return float(t.sum())

    @endpoint
    def drop(self):
        self.kept = None
        gc.collect()
        return True

    @endpoint
    def make_tensor(self, n):
        import torch
        return torch.full((n,), 3.0)

    @endpoint
    def pool_in_use(self):
        from monarch_cy._actor.base.state import get_node
        return get_node().pool.in_use()

    @endpoint
    def unloadable(self):
        return Unloadable()

    @endpoint
    def bad_result(self):
        return BadReduce()

    @endpoint
    def raise_unloadable(self):
        raise Oops("nor me")


@pytest.fixture(scope="module")
def proc1():
    pm = this_host().spawn_procs(per_host={"procs": 1})
    yield pm
    pm.stop().get(10)


@pytest.fixture(scope="module")
def ser(proc1):
    return proc1.spawn("ser", Ser).slice(procs=0)


def _settle(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def test_functions_by_value_through_a_call(ser):
    k = 11
    assert ser.apply.call_one(lambda x: x * 3, 5).get(20) == 15
    assert ser.apply.call_one(lambda x: x + k, 1).get(20) == 12
    assert ser.apply.call_one(double, 21).get(20) == 42          # by reference
    add5 = ser.adder.call_one(5).get(20)                          # a closure back
    assert add5(1) == 6


def test_local_and_unimportable_classes_through_a_call(ser):
    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def norm1(self):
            return abs(self.x) + abs(self.y)

    assert ser.method.call_one(Point(3, -4), "norm1").get(20) == 7
    assert ser.method.call_one(_main_class()(6), "apply", 7).get(20) == 42
    assert ser.method.call_one(_dynamic_class()(), "twice", 8).get(20) == 16
    back = ser.echo.call_one(Point(1, 2)).get(20)
    assert (back.x, back.y) == (1, 2) and back.norm1() == 3


def test_local_actor_class_spawns_by_value(proc1):
    class Local(Actor):
        @endpoint
        def hi(self, x):
            return f"hi {x}"

    assert proc1.spawn("local_by_value", Local).hi.call_one(3).get(20) == "hi 3"


def test_parameters_strides_memory_format_through_a_call(ser):
    torch = pytest.importorskip("torch")
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    m[1].bias.requires_grad_(False)
    got = ser.describe_module.call_one(m).get(20)
    assert got == [("0.weight", "Parameter", True, True), ("0.bias", "Parameter", True, True),
                   ("1.weight", "Parameter", True, True), ("1.bias", "Parameter", True, False)]
    m2 = ser.echo.call_one(m).get(20)
    assert isinstance(m2[0].weight, torch.nn.Parameter) and m2[0].weight.requires_grad
    assert torch.equal(m2[1].weight, m[1].weight)
    t = torch.arange(20.0).reshape(4, 5).T
    assert ser.describe.call_one(t).get(20) == ("Tensor", False, (1, 5), False, 0)
    cl = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    assert ser.describe.call_one(cl).get(20)[2:4] == (tuple(cl.stride()), True)
    back = ser.echo.call_one(cl).get(20)
    assert back.is_contiguous(memory_format=torch.channels_last) and torch.equal(back, cl)
    p = torch.nn.Parameter(torch.ones(3))
    assert ser.describe.call_one(p).get(20)[:2] == ("Parameter", True)


def test_views_alias_on_the_receiver(ser):
    torch = pytest.importorskip("torch")
    for n in (4, 1 << 18):           # in band, and through shm
        base = torch.arange(3.0 * n).reshape(3, n)
        same, at_t, at_tt, views = ser.poke_views.call_one((base, base[1:], base.T)).get(20)
        assert same and at_t == -1.0 and at_tt == -1.0
        assert base[1, 0] == n                           # the caller's copy is untouched
        t, tail, tt = views                              # and back: still one storage
        tail[0, 1] = -2.0
        assert t[1, 1] == -2.0 and tt[1, 1] == -2.0


def test_large_tensors_through_shm_and_released(ser):
    torch = pytest.importorskip("torch")
    from monarch_cy._actor.base.state import get_node
    node = get_node()
    big = torch.ones(1 << 20)
    data, bufs = wire.dumps(((big,), {}))
    assert len(data) < 1000 and bufs[0].nbytes == 4 << 20
    # the actor keeps the tensor: our segment stays referenced until it lets go
    assert ser.keep.call_one(big).get(20) == float(1 << 20)
    assert _settle(lambda: node.pool.in_use() == 0, 1.0) is False
    assert ser.drop.call_one().get(20)
    assert _settle(lambda: node.pool.in_use() == 0)
    # a returned tensor (and a view of it) keeps the worker's segment alive
    r = ser.make_tensor.call_one(1 << 20).get(20)
    view = r[10:20]
    del r
    gc.collect()
    assert ser.pool_in_use.call_one().get(20) >= 1
    assert view.tolist() == [3.0] * 10
    del view
    gc.collect()
    assert _settle(lambda: ser.pool_in_use.call_one().get(20) == 0)


def test_unpicklable_arguments_name_the_type(ser):
    with pytest.raises(TypeError, match=r"endpoint .*echo cannot be sent: cannot pickle "
                                        r"object of type _thread\.lock"):
        ser.echo.call_one(threading.Lock())
    # the object's own pickling code raised: the caller gets that exception, as
    # Monarch's do, with a note naming the endpoint
    with pytest.raises(ValueError, match="no reduction") as ei:
        ser.echo.call_one(BadReduce())
    assert any("ser" in n and "echo" in n for n in ei.value.__notes__)
    with pytest.raises(TypeError, match="too deeply"):
        ser.echo.call_one(_deep())
    assert ser.echo.call_one(1).get(20) == 1


def test_unpicklable_result_is_an_actor_error(ser):
    with pytest.raises(ActorError, match=r"BadReduce .*ValueError: no reduction"):
        ser.bad_result.call_one().get(20)
    assert ser.echo.call_one(2).get(20) == 2


@pytest.mark.timeout(60)
def test_result_that_fails_to_unpickle_fails_the_call(ser, proc1):
    with pytest.raises(ActorError, match=r"could not be unpickled.*ValueError: cannot "
                                         r"rebuild me here") as ei:
        ser.unloadable.call_one().get(30)
    assert isinstance(ei.value.exception, pickle.UnpicklingError)
    with pytest.raises(ActorError, match="could not be unpickled"):
        proc1.spawn("ser_all", Ser).unloadable.call().get(30)
    with pytest.raises(ActorError, match=r"error of the call .*could not be unpickled"):
        ser.raise_unloadable.call_one().get(30)
    assert ser.echo.call_one(3).get(20) == 3
