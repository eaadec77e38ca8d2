"""Print, as JSON, the values that AMD's hip-python bindings were compiled with.

Run by ``tests/test_hip_python_proof.py`` in a subprocess whose ``sys.path``
holds one release's ``hip-python`` wheel (installed into a throwaway folder):
the bindings are generated from that ROCm release's headers and compiled
against them, so every number printed here is what the C compiler saw in the
real ``hip_runtime_api.h`` and ``rccl.h`` of that release.  Nothing is called
in the runtime: the modules import without a GPU or ROCm.

The request (JSON on stdin) names what to read:

``{"values": [name, ...]}``
    enum members and macro constants of ``hip.hip`` / ``hip.rccl``; a name
    neither module has is ``null``.
``{"enums": [enum class, ...]}``
    every member (aliases included) of each enum: ``{member: value}``;
    an absent enum is ``null``.
``{"structs": {python class: [field, ...]}}``
    ``c_sizeof`` of each struct, and each field's byte offset, found on a
    zeroed instance: a settable field is set to a value with a non-zero low
    byte (an enum-typed field to one of its members) and the first byte that changes is its offset; a read-only character
    array is found by writing one byte at each position until the field's
    getter returns it.  An absent field is ``null``.

The answer adds the bindings' own version and the HIP version macros.
"""

from __future__ import annotations

import ctypes
import enum
import json
import sys

import hip as hip_package  # type: ignore[import-not-found]
from hip import hip, rccl  # type: ignore[import-not-found]
from hip import _version  # type: ignore[import-not-found]

MODULES = (hip, rccl)
# Values tried in turn when setting a field: the first the setter accepts wins;
# each has a non-zero lowest byte, so the first changed byte is the offset.
SENTINELS = (-1, 2**64 - 1, 2**32 - 1, 0x7FFFFFFF, 0x7F, 1)


def _enum_members() -> dict[str, int]:
    members: dict[str, int] = {}
    for module in MODULES:
        for attr in dir(module):
            obj = getattr(module, attr)
            if isinstance(obj, type) and issubclass(obj, enum.Enum):
                # __members__ includes aliases (ROCm 7 spells hipDeviceAttributePciDomainId
                # both ways); iterating the class would skip them.
                for name, m in obj.__members__.items():
                    members.setdefault(name, int(m.value))
    return members


def _value(name: str, members: dict[str, int]):
    for module in MODULES:
        v = getattr(module, name, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return int(v)
    return members.get(name)


def _raw(obj, size: int) -> bytes:
    return ctypes.string_at(obj.as_c_void_p().value, size)


def _struct_class(name: str):
    for module in MODULES:
        cls = getattr(module, name, None)
        if isinstance(cls, type):
            return cls
    raise SystemExit(f"no struct class {name!r} in hip.hip or hip.rccl")


def _sentinels(cls, field: str, size: int):
    """Values to try: for an enum-typed field its non-zero members, else SENTINELS."""
    obj = cls()
    ctypes.memset(obj.as_c_void_p().value, 0, size)
    try:
        current = getattr(obj, field)
    except ValueError:  # an enum without a zero member
        current = None
    if isinstance(current, enum.Enum):
        return [m for m in type(current) if int(m.value) & 0xFF]
    return list(SENTINELS)


def _settable_offset(cls, field: str, size: int):
    for sentinel in _sentinels(cls, field, size):
        obj = cls()
        ctypes.memset(obj.as_c_void_p().value, 0, size)
        try:
            setattr(obj, field, sentinel)
        except AttributeError:  # read-only (character arrays)
            return None
        except (TypeError, ValueError, OverflowError):
            continue
        changed = [i for i, b in enumerate(_raw(obj, size)) if b]
        if changed:
            return changed[0]
    return None


def _char_array_offset(cls, field: str, size: int):
    obj = cls()
    base = obj.as_c_void_p().value
    for k in range(size):
        ctypes.memset(base, 0, size)
        ctypes.memset(base + k, 0x41, 1)
        try:
            got = getattr(obj, field)
        except ValueError:
            continue
        if isinstance(got, (bytes, bytearray)) and bytes(got[:1]) == b"A":
            return k
    return None


def _field_offset(cls, field: str, size: int):
    if not hasattr(cls, field):
        return None
    offset = _settable_offset(cls, field, size)
    if offset is None:
        offset = _char_array_offset(cls, field, size)
    return offset


def main() -> None:
    request = json.load(sys.stdin)
    members = _enum_members()
    values = {n: _value(n, members) for n in request.get("values", [])}
    enums = {}
    for name in request.get("enums", []):
        cls = next((getattr(m, name) for m in MODULES if isinstance(getattr(m, name, None), type)), None)
        enums[name] = None if cls is None else {k: int(v.value) for k, v in cls.__members__.items()}
    structs = {}
    for cls_name, fields in request.get("structs", {}).items():
        cls = _struct_class(cls_name)
        size = int(cls.c_sizeof(cls()))
        structs[cls_name] = {
            "size": size,
            "offsets": {f: _field_offset(cls, f, size) for f in fields},
        }
    json.dump({
        "hip_version": hip.HIP_VERSION,
        "hip_version_major": hip.HIP_VERSION_MAJOR,
        "hip_version_minor": hip.HIP_VERSION_MINOR,
        "branch": getattr(_version, "HIP_PYTHON_BRANCH", None),
        "rocm_version": getattr(hip_package, "ROCM_VERSION_NAME", None),
        "values": values,
        "enums": enums,
        "structs": structs,
    }, sys.stdout)


if __name__ == "__main__":
    main()
