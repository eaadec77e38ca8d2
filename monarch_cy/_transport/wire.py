"""Serialization: cloudpickle, pickle protocol 5, out-of-band buffers.

``dumps`` returns the pickle stream plus the list of large buffers (numpy arrays,
bytes of torch CPU storages, anything exposing ``PickleBuffer``) that were kept out
of it.  The node sends each buffer either as its own zero-copy zmq frame or, between
procs of one host, through a shared-memory segment (:mod:`.shm`).

* Pickling goes through a subclass of ``cloudpickle.Pickler``: classes and functions
  that cannot be imported by name on the other side (defined in ``__main__``, in a
  function, in a notebook; lambdas, closures) travel by value, importable ones by
  reference.  ``loads`` is plain ``pickle.loads`` (cloudpickle's output needs no
  special unpickler).
* Torch tensors keep torch's own reduction (``Tensor.__reduce_ex__``: subclasses such
  as ``nn.Parameter``, ``requires_grad``, strides, storage offset, memory format);
  only CPU *storages* are intercepted (``reducer_override``): each becomes a
  ``PickleBuffer`` of its bytes (out of band when large) plus its dtype, rebuilt on
  the receiving side zero-copy with ``torch.frombuffer``.  Storages are deduplicated
  by data pointer within one ``dumps`` through a memoized holder object, so views
  sent in one message (``(t, t[1:], t.T)``) arrive as views of one storage.
  Non-CPU storages keep torch's default.  Torch is touched only when the sender has
  already imported it; the receiver imports it only when a storage arrives.
* Anything that makes pickling fail becomes ``TypeError`` naming the object's type.
* Hot path (``((1,), {})`` per call): picklers are reused (a pool: thread-safe and
  reentrant), with no per-call setup; builtin containers and scalars never reach
  Python code; cloudpickle's by-reference verdicts on functions and classes, and
  the types it leaves to plain pickle, are cached.
"""

from __future__ import annotations

import pickle
import sys

import cloudpickle

__all__ = ["dumps", "loads", "INBAND_LIMIT"]

INBAND_LIMIT = 8 * 1024   # buffers smaller than this stay inside the pickle stream

_cp_reducer_override = cloudpickle.Pickler.reducer_override


# -- torch storages ----------------------------------------------------------
_storage_types = None     # (TypedStorage, UntypedStorage) once torch is imported
_typed_cls = None
_dtype_names = {}


def _torch_storage_types():
    """The storage classes, when the sender has imported torch (never imports it)."""
    global _storage_types, _typed_cls
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        typed, untyped = torch.storage.TypedStorage, torch.storage.UntypedStorage
    except AttributeError:      # torch is half-imported
        return None
    _typed_cls = typed
    _storage_types = (typed, untyped)
    return _storage_types


class _StorageBytes:
    """Holder of one CPU UntypedStorage within one ``dumps``: memoized by the pickler,
    so every view of the storage refers to one rebuilt storage on the other side.
    Its ``__array_interface__`` lends the storage's bytes to numpy (the array, and any
    zero-copy frame made from it, keep the holder and so the storage alive)."""

    __slots__ = ("storage",)

    def __init__(self, storage) -> None:
        self.storage = storage

    @property
    def __array_interface__(self) -> dict:
        u = self.storage
        return {"data": (u.data_ptr(), False), "shape": (u.nbytes(),), "typestr": "|u1",
                "version": 3}

    def __reduce__(self):
        if self.storage.nbytes() == 0:
            return (_rebuild_storage, (bytearray(),))
        import numpy
        return (_rebuild_storage, (pickle.PickleBuffer(numpy.asarray(self)),))


def _rebuild_storage(x, dtype_name=None):
    """``x`` a buffer: an UntypedStorage on it, zero-copy; ``x`` an UntypedStorage
    (and a dtype name): a TypedStorage of it.  One function for both: one global
    in the stream."""
    import torch
    if dtype_name is not None:
        return torch.storage.TypedStorage(wrap_storage=x, dtype=getattr(torch, dtype_name),
                                          _internal=True)
    if memoryview(x).nbytes == 0:
        return torch.UntypedStorage(0)
    return torch.frombuffer(x, dtype=torch.uint8).untyped_storage()


def _as_is(x):
    return x


def _dtype_name(dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).rsplit(".", 1)[1]
    return name


# -- the pickler -------------------------------------------------------------
# cloudpickle's private reducers (its ``dispatch_table`` is a Python ChainMap of
# them and copyreg's): looked up in reducer_override when the table is there
_cp_private_table = getattr(cloudpickle.Pickler, "_dispatch_table", None)
_by_value_modules = getattr(cloudpickle.cloudpickle, "_PICKLE_BY_VALUE_MODULES", set())
_byref = {}                 # id -> function/class cloudpickle pickles by reference
_byref_modules = frozenset()  # _by_value_modules when _byref was filled
_plain_types = set()        # types whose instances go to pickle's own reduction
_FunctionType = type(_as_is)


class _Pickler(cloudpickle.Pickler):
    """cloudpickle + out-of-band buffers + CPU storages as raw bytes; reusable.

    Faster than a fresh ``cloudpickle.Pickler`` per call: one is reused (through
    ``_pool``: reentrant and thread-safe), the by-reference verdicts of cloudpickle
    on functions and classes are cached (``_byref``), and cloudpickle's private
    reducers are looked up here, so the C pickler reads ``copyreg.dispatch_table``
    directly instead of cloudpickle's Python ``ChainMap``.
    """

    if _cp_private_table is not None:
        # No instance dispatch table: the C pickler then uses copyreg's, live.
        dispatch_table = property(lambda self: _no_attr())

    def __init__(self) -> None:
        self.chunks = chunks = []
        self.bufs = bufs = []

        def cb(pb, append=bufs.append):
            raw = pb.raw()
            if raw.nbytes < INBAND_LIMIT:
                return True
            append(raw)
            return False

        super().__init__(_Sink(chunks.append), 5, buffer_callback=cb)
        self.last = None          # last object reduced: the culprit when dump fails
        self.storages = None      # (data_ptr, nbytes) -> _StorageBytes, in one dump

    def reducer_override(self, obj):
        global _byref, _byref_modules
        self.last = obj
        t = type(obj)
        if t in _plain_types:
            return NotImplemented
        i = id(obj)
        if _byref.get(i) is obj:
            if _by_value_modules == _byref_modules:
                return NotImplemented
            _byref = {}
            _byref_modules = frozenset(_by_value_modules)
        st = _storage_types
        if st is None and "torch" in sys.modules:
            st = _torch_storage_types()
        if st is not None:
            if t is _StorageBytes:
                return obj.__reduce__()
            if isinstance(obj, st):
                r = self._reduce_storage(obj)
                if r is not None:
                    return r
        if _cp_private_table is not None:
            r = _cp_private_table.get(t)
            if r is not None:
                return r(obj)
        r = _cp_reducer_override(self, obj)
        if r is NotImplemented:
            if t is _FunctionType or isinstance(obj, type):
                if len(_byref) > 4096:
                    _byref = {}
                _byref[i] = obj
            elif st is None or not issubclass(t, st):
                # cloudpickle decides instances by their type alone: remember it
                if len(_plain_types) > 4096:
                    _plain_types.clear()
                _plain_types.add(t)
        return r

    def _reduce_storage(self, s):
        if isinstance(s, _typed_cls):
            u = s._untyped_storage
            if u.device.type != "cpu":
                return None
            return (_rebuild_storage, (self._holder(u), _dtype_name(s.dtype)))
        if s.device.type != "cpu":
            return None
        return (_as_is, (self._holder(s),))

    def _holder(self, u):
        n = u.nbytes()
        if n == 0:
            return _StorageBytes(u)
        d = self.storages
        if d is None:
            d = self.storages = {}
        key = (u.data_ptr(), n)
        h = d.get(key)
        if h is None:
            h = d[key] = _StorageBytes(u)
        return h


class _Sink:
    """The pickler's file: each write (usually one per dump) appended to a list."""

    __slots__ = ("write",)

    def __init__(self, write) -> None:
        self.write = write


def _no_attr():
    raise AttributeError("dispatch_table")


_dump = pickle.Pickler.dump
_pool = []                  # idle picklers (pop/append: atomic, reentrancy-safe)


def dumps(obj, _retry: bool = True) -> tuple:
    """Pickle ``obj``; return ``(stream_bytes, [large raw memoryviews])``.

    Raises ``TypeError`` naming the type of the object that failed to pickle.
    """
    try:
        p = _pool.pop()
    except IndexError:
        p = _Pickler()
    try:
        _dump(p, obj)
    except Exception as e:
        culprit = p.last if p.last is not None else obj
        _reset(p)
        p.bufs.clear()
        p.chunks.clear()
        p.clear_memo()
        _pool.append(p)
        if _retry and _byref.get(id(culprit)) is culprit:
            # cached as "by reference" but no longer importable as such (a module
            # reloaded, a name rebound): forget the verdict, let cloudpickle decide
            _byref.pop(id(culprit), None)
            return dumps(obj, False)
        raise TypeError(_failure(culprit, e)) from e
    chunks = p.chunks
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    chunks.clear()
    bufs = p.bufs
    if bufs:
        out = bufs[:]
        bufs.clear()
    else:
        out = []
    if p.last is not None:
        _reset(p)
    p.clear_memo()
    _pool.append(p)
    return data, out


def _reset(p) -> None:
    p.last = None
    p.storages = None
    if p.globals_ref:
        p.globals_ref = {}


def loads(data, buffers=()):
    return pickle.loads(data, buffers=buffers)


def _failure(obj, e: BaseException) -> str:
    """``cannot pickle object of type T (short repr): reason``; ``obj`` is the object
    being reduced when pickling failed (else the whole message)."""
    t = type(obj)
    mod = getattr(t, "__module__", None)
    what = t.__qualname__ if mod in (None, "builtins") else f"{mod}.{t.__qualname__}"
    cause = e
    if isinstance(e, pickle.PicklingError) and isinstance(e.__cause__, RecursionError):
        cause = e.__cause__
    if isinstance(cause, RecursionError):
        reason = "it is nested too deeply (RecursionError: maximum recursion depth exceeded)"
    else:
        reason = f"{type(cause).__name__}: {cause}"
    return f"cannot pickle object of type {what} ({_short(obj)}): {reason}"


_repr = None


def _short(obj) -> str:
    global _repr
    if _repr is None:
        import reprlib
        _repr = reprlib.Repr()
        _repr.maxother = _repr.maxstring = 120
    try:
        return _repr.repr(obj)
    except Exception:  # noqa: BLE001 - a broken __repr__
        return f"<{type(obj).__qualname__} object>"
