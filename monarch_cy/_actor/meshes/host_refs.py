"""What a host mesh is outside the object a program made: references and views.

* A host mesh of remote hosts is a set of agent links that live in the controller
  (``monarch_cy._hosts.attach.HostSet``).  Each set has a ``uid``; :func:`register`
  keeps the controller's sets by it (weakly), so a host mesh pickled anywhere in the
  job unpickles, in the controller, to a reference over the same links, and elsewhere
  to a reference that asks the controller (:class:`HostRef`): ``spawn_procs`` there
  goes to the controller, which starts the procs on those hosts.
* Every proc learns its own host at start (:func:`set_worker_host`, from its start-up
  config): the host it runs on, as a 0-dimensional slice of the mesh it was spawned
  from, and the mesh's bootstrap command (``HostMesh.with_python_executable``), so
  ``this_host()`` in an actor names that host and spawns the way its parent did.
* Monarch's tests read a host mesh's native handle: ``_hy_host_mesh.block_on()``
  (a resolved handle, :class:`Resolved`) whose ``region`` (:class:`Region`: ``labels``,
  ``slice()``) is the mesh's.  monarch_cy has no native mesh object; these views give
  what those reads observe.
"""

from __future__ import annotations

import weakref

__all__ = ["Region", "Resolved", "NativeMesh", "Derived", "HostRef", "register", "lookup",
           "describe", "set_worker_host", "worker_host"]

_SETS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_worker = None            # (host uid or None, shape, bootstrap command or None)


class Region:
    """Monarch's ``Region`` of a mesh: its ``labels`` (a list) and ``slice()`` (the
    ranks, an ``NDSlice``: offset, sizes, strides)."""

    __slots__ = ("_shape",)

    def __init__(self, shape) -> None:
        self._shape = shape

    @property
    def labels(self) -> list:
        return list(self._shape.labels)

    def slice(self):
        return self._shape.ndslice

    def __len__(self) -> int:
        return len(self._shape)

    def __eq__(self, other) -> bool:
        return isinstance(other, Region) and self.labels == other.labels and \
            self.slice() == other.slice()

    def __hash__(self) -> int:
        return hash((tuple(self._shape.labels), self.slice()))

    def __repr__(self) -> str:
        return f"Region(labels={self.labels}, slice={self.slice()!r})"


class NativeMesh:
    """What Monarch's native handle of a mesh resolves to, as far as a program can
    observe it here: its ``region``."""

    __slots__ = ("region",)

    def __init__(self, shape) -> None:
        self.region = Region(shape)

    def __repr__(self) -> str:
        return f"<native mesh {self.region!r}>"


class Resolved:
    """Monarch's ``Shared[...]`` of a value that is already there: ``poll()`` and
    ``block_on()`` return it at once, and so does ``await``."""

    __slots__ = ("_value",)

    def __init__(self, value) -> None:
        self._value = value

    def poll(self):
        return self._value

    def block_on(self):
        return self._value

    def __await__(self):
        return self._value
        yield  # noqa: unreachable - makes this a generator, as __await__ must be

    def __repr__(self) -> str:
        return f"<resolved {self._value!r}>"


class Derived:
    """The native handle of a slice whose parent's handle is still pending (a program
    assigned one, as Monarch's tests do): pending while the parent is, then the
    slice's :class:`NativeMesh`."""

    __slots__ = ("_parent", "_shape")

    def __init__(self, parent, shape) -> None:
        self._parent, self._shape = parent, shape

    def poll(self):
        return None if self._parent.poll() is None else NativeMesh(self._shape)

    def block_on(self):
        self._parent.block_on()
        return NativeMesh(self._shape)


class HostRef:
    """A host set seen from a process other than the controller that holds its
    links: only its ``uid``; ``spawn_procs`` on it asks the controller."""

    __slots__ = ("uid",)

    def __init__(self, uid: str) -> None:
        self.uid = uid

    def resolve(self, ranks):
        raise RuntimeError("this host mesh's agents are linked to the controller; "
                           "only the controller resolves its hosts")

    def __repr__(self) -> str:
        return f"<hosts {self.uid} of the controller>"


def register(hosts) -> None:
    """Keep the controller's host set ``hosts`` findable by its ``uid``."""
    _SETS[hosts.uid] = hosts


def lookup(uid: str | None):
    """The host set ``uid`` of this process (None: this host), else a :class:`HostRef`."""
    if uid is None:
        return None
    hosts = _SETS.get(uid)
    return hosts if hosts is not None else HostRef(uid)


def describe(uid: str | None, shape, bootstrap) -> list:
    """The JSON form of a proc's host (its start-up config's ``host_mesh``): the host
    set's ``uid`` (None: the controller's host), the 0-dimensional shape of its host
    in that set, and the mesh's bootstrap command (None: the default)."""
    boot = None if bootstrap is None else [bootstrap.program, bootstrap.arg0,
                                           bootstrap.args, bootstrap.env]
    return [uid, list(shape.labels), shape.offset, list(shape.sizes),
            list(shape.strides), boot]


def set_worker_host(desc) -> None:
    """In a proc, at start: its start-up config's ``host_mesh`` (:func:`describe`);
    :func:`worker_host` then gives ``(uid, shape, bootstrap command or None)``."""
    global _worker
    if desc is None:
        _worker = None
        return
    from monarch_cy._actor.base.shape import Shape  # deferred: only procs read this
    from monarch_cy._actor.launch.bootstrap_command import BootstrapCommand  # deferred: as above
    uid, labels, offset, sizes, strides, boot = desc
    _worker = (uid, Shape(labels, offset, sizes, strides),
               None if boot is None else BootstrapCommand(*boot))


def worker_host():
    """This proc's host descriptor (None in the controller or when not given)."""
    return _worker
