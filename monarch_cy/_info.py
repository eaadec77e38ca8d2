"""What this machine offers monarch_cy: the platform report behind ``monarch-cy info``.

Every probe here is best-effort and reports why something is unavailable
instead of raising; nothing in it is on a hot path.

The report (``monarch-cy info --json``) has a fixed shape: every key is always
present, ``null`` where it does not apply (no runtime bound, no library found),
so scripts can index it without checks.  ``schema`` (:data:`SCHEMA`) is its
version: it grows when a key is added, removed or changes meaning.  docs/cli.md
documents every key; tests/test_cli.py checks the documentation and the output agree.
"""

from __future__ import annotations

import ctypes
import os
import platform as _pyplatform
import sys
from typing import Any

from monarch_cy import __version__, _runtime
from monarch_cy._platform_tables import proof_statement

SCHEMA = 1
"""Version of the report's shape (the ``schema`` key)."""

_NCCL_PLATFORMS = ("cuda", "rocm")


def _device_entry(ordinal: int, p) -> dict[str, Any]:
    """One ``gpu.devices`` entry from a :class:`~monarch_cy.gpu.DeviceProperties`."""
    return {
        "ordinal": ordinal,
        "name": p.name,
        "pci_bus_id": p.pci_bus_id,
        "total_memory_gib": round(p.total_memory / 2**30, 1),
        "arch": p.arch,
        "compute_capability": "%d.%d" % p.compute_capability,
        "multiprocessors": p.multiprocessor_count,
    }


def _gpu_report() -> dict[str, Any]:
    out: dict[str, Any] = {
        "requested": None, "bound": False, "error": None, "platform": None, "library": None,
        "found_via": None, "runtime_version": None, "table": None, "table_proof": None,
        "driver_version": None,
        "driver_error": None, "devices": [], "devices_error": None,
    }
    try:
        out["requested"] = _runtime.requested_platform()
        binding = _runtime.ensure_bound()
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out["error"] = str(e)
        return out
    from monarch_cy import _hip_shim as rt
    from monarch_cy.errors import GpuRuntimeError

    out.update(
        bound=True,
        platform=binding.platform,
        library=binding.path,
        found_via=binding.source,
        runtime_version=binding.version_text,
        table=binding.table.name,
        table_proof=proof_statement(binding.platform, binding.version),
    )
    try:
        out["driver_version"] = rt.driverGetVersion()
    except GpuRuntimeError as e:
        out["driver_error"] = f"{e.name}: {e.message}"
    try:
        from monarch_cy.gpu import Device

        out["devices"] = [_device_entry(i, Device(i).properties) for i in range(rt.getDeviceCount())]
    except GpuRuntimeError as e:
        out["devices_error"] = f"{e.name}: {e.message}"
    return out


def _nccl_report(platform: str | None) -> dict[str, Any]:
    """Whether NCCL (CUDA) or RCCL (ROCm) can be loaded, and its version: the places
    the NCCL loader would search, in its order (``MONARCH_CY_NCCL_LIBRARY`` first and
    alone), opened but not bound."""
    from monarch_cy._collectives import _nccl_loader
    tried = []
    for c in _nccl_loader.candidates():
        if platform in _NCCL_PLATFORMS and c.platform not in (platform, "auto"):
            continue
        try:
            lib = ctypes.CDLL(c.location)
            v = ctypes.c_int(0)
            if lib.ncclGetVersion(ctypes.byref(v)) != 0:
                raise OSError("ncclGetVersion failed")
        except (OSError, AttributeError) as e:
            tried.append(f"{c.location}: {e}")
            continue
        major, minor, patch = _nccl_loader.version_tuple(v.value)
        rccl = c.platform == "rocm" or (c.platform == "auto" and "rccl" in c.location)
        return {"available": True, "library": "RCCL" if rccl else "NCCL",
                "path": c.location, "version": f"{major}.{minor}.{patch}", "tried": tried}
    return {"available": False, "library": None, "path": None, "version": None, "tried": tried}


def _verbs_report() -> dict[str, Any]:
    try:
        import pyverbs.device as d  # noqa: PLC0415 - optional dependency
    except ImportError as e:
        return {"available": False, "devices": [], "reason": f"pyverbs not importable ({e})"}
    try:
        devices = [dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name) for dev in d.get_device_list()]
    except Exception as e:  # noqa: BLE001 - pyverbs raises its own errors
        return {"available": False, "devices": [], "reason": f"no verbs devices ({e})"}
    return {"available": bool(devices), "devices": devices, "reason": None if devices else "no verbs devices"}


def report() -> dict[str, Any]:
    """The platform report (schema :data:`SCHEMA`; every key documented in docs/cli.md)."""
    gpu = _gpu_report()
    return {
        "schema": SCHEMA,
        "monarch_cy": __version__,
        "python": sys.version.split()[0],
        "machine": {"system": _pyplatform.system(), "arch": _pyplatform.machine(), "cpus": os.cpu_count()},
        "gpu": gpu,
        "collectives": _nccl_report(gpu.get("platform")),
        "verbs": _verbs_report(),
    }


def format_report(r: dict[str, Any]) -> str:
    """The report as the lines ``monarch-cy info`` prints."""
    g, m = r["gpu"], r["machine"]
    lines = [f"monarch_cy {r['monarch_cy']}  (Python {r['python']}, {m['system']} {m['arch']}, {m['cpus']} CPUs)"]
    if not g["bound"]:
        lines.append(f"GPU runtime:  none ({g['error'].splitlines()[0] if g['error'] else 'not found'})")
        if g["error"] and "\n" in g["error"]:
            lines += ["  " + ln for ln in g["error"].splitlines()[1:]]
        lines.append("platform:     CPU only (meshes run as CPU processes)")
    else:
        lines.append(f"platform:     {g['platform']}  (requested: {g['requested']})")
        lines.append(f"GPU runtime:  {g['library']}  [{g['found_via']}], version {g['runtime_version']}, table {g['table']}")
        lines.append(f"ABI tables:   {g['table_proof']}")
        if g["driver_version"] is None:
            lines.append(f"driver:       unavailable ({g['driver_error']})")
        else:
            lines.append(f"driver:       {g['driver_version'] or 'none installed (version 0)'}")
        if g["devices"]:
            for d in g["devices"]:
                lines.append(
                    f"device {d['ordinal']}:     {d['name']}  {d['arch']}  {d['total_memory_gib']} GiB  "
                    f"{d['multiprocessors']} SMs/CUs  PCI {d['pci_bus_id']}"
                )
        else:
            lines.append(f"devices:      none ({g['devices_error'] or 'count is 0'})")
    c = r["collectives"]
    if c["available"]:
        lines.append(f"collectives:  {c['library']} {c['version']}  ({c['path']})")
    else:
        lines.append("collectives:  NCCL/RCCL not found; CPU meshes use gloo")
    v = r["verbs"]
    lines.append("verbs:        " + (", ".join(v["devices"]) if v["available"] else f"unavailable: {v['reason']}"))
    return "\n".join(lines)
