"""One ROCm release as AMD's ``hip-python`` bindings describe it, for the ABI proofs.

``hip-python`` (one wheel per ROCm release) is generated from that release's
``hip_runtime_api.h`` and ``rccl.h`` and compiled against them.  Two kinds of
facts are read off it:

* compiled values (enum values, macro constants, struct sizes and field
  offsets), by ``tests/vendor_headers/hip_python_dump.py`` in a subprocess that
  imports the release's modules (see that file for how offsets are found);
* declarations, from the generated sources: the prototypes and typedefs in
  ``chip.pxd`` / ``crccl.pxd``, the field types of structs (for widths), and
  the symbol each function is loaded from in ``chip.pyx`` / ``crccl.pyx``
  (``hipGetDeviceProperties`` -> ``hipGetDevicePropertiesR0600``).

Types are compared in a canonical form: typedef chains resolved, enums as
``int`` (the headers prove our enums int-sized), top-level ``const`` dropped,
``size_t`` as ``unsigned long`` (LP64, what the generator writes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import _vendor_wheels

DUMP = Path(__file__).resolve().parent / "vendor_headers" / "hip_python_dump.py"
# What the proofs read; the rest of the 300 MB wheel is deleted after install.
KEEP = ("hip/__init__.py", "hip/_version.py", "hip/_util/*", "hip/_hip_helpers*",
        "hip/hip.*", "hip/chip.*", "hip/rccl.*", "hip/crccl.*")
_BUILTIN = {"size_t": "unsigned long", "ssize_t": "long", "_Bool": "bool", "bint": "bool"}


def install(version: str) -> Path:
    """The folder holding ``hip-python==version`` (cached; see ``tests/_vendor_wheels``)."""
    return _vendor_wheels.installed(f"hip-python-{version}", [f"hip-python=={version}"], KEEP)


def dump(site: Path, request: dict) -> dict:
    """Run the dump script with ``site`` first on the path; its JSON answer."""
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, str(DUMP)], input=json.dumps(request), env=env,
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"hip_python_dump.py failed in {site}:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout)


@dataclass
class Declarations:
    """What one module pair (``chip``, ``crccl``) declares."""

    prototypes: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    typedefs: dict[str, str] = field(default_factory=dict)
    enums: set[str] = field(default_factory=set)
    struct_fields: dict[str, dict[str, str]] = field(default_factory=dict)
    symbols: dict[str, str] = field(default_factory=dict)

    def canon(self, ctype: str, ours: dict[str, str] | None = None) -> str:
        """``ctype`` in canonical form (``ours`` maps our alias names first)."""
        toks = ctype.replace("*", " * ").split()
        if toks and toks[0] == "const" and "*" not in toks:
            toks = toks[1:]  # top-level const: no ABI meaning
        stars = toks.count("*")
        base = [t for t in toks if t != "*"]
        const = bool(base) and base[0] == "const"
        name = " ".join(base[1:] if const else base)
        for _ in range(20):
            if ours and name in ours:
                name = ours[name]
                continue
            if name in _BUILTIN:
                name = _BUILTIN[name]
                continue
            if name in self.typedefs:
                inner = self.canon(self.typedefs[name])
                inner_stars = inner.count("*")
                inner_base = inner.replace("*", "").strip()
                if inner_base.startswith("const "):
                    const, inner_base = True, inner_base[6:]
                name, stars = inner_base, stars + inner_stars
                continue
            break
        if name in self.enums:
            name = "int"
        return ("const " if const else "") + name + (" " + "*" * stars if stars else "")


_PROTO = re.compile(r"^cdef\s+(.+?)\s*\b(\w+)\((.*)\)(?:\s+(?:except\b.*|noexcept\b.*|nogil))*\s*$")
_FIELD = re.compile(r"^\s+(.+?)\s+(\w+)\s*$")


def split_params(params: str, named: bool) -> list[str]:
    """Parameter types of a C parameter list (``named``: each ends with a name to drop)."""
    params = params.strip()
    if params in ("", "void"):
        return []
    out = []
    for p in params.split(","):
        p = p.replace("*", " * ").strip()
        if named:
            p = re.sub(r"\s*\b\w+\s*$", "", p)
        out.append(p)
    return out


def _parse_pxd(text: str, decl: Declarations) -> None:
    struct = None
    for line in text.splitlines():
        code = line.split("#", 1)[0].rstrip()
        if not code.strip():
            continue
        m = re.match(r"^\s*(?:cdef|ctypedef)\s+(struct|union|enum)\s+(\w+)(?:\s+\"\w+\")?\s*:\s*$", code)
        if m:
            kind, name = m.groups()
            struct = name if kind in ("struct", "union") else None
            if kind == "enum":
                decl.enums.add(name)
            else:
                decl.struct_fields[name] = {}
            continue
        if struct and line.startswith("        "):
            f = _FIELD.match(code)
            if f:
                decl.struct_fields[struct][f.group(2)] = f.group(1)
            continue
        struct = None
        m = re.match(r"^\s*ctypedef\s+([^()]+?)\s+(\w+)\s*$", code)
        if m:
            decl.typedefs[m.group(2)] = m.group(1)
            continue
        m = _PROTO.match(code)
        if m:
            ret, name, params = m.groups()
            decl.prototypes[name] = (ret, split_params(params, named=True))


def declarations(site: Path) -> Declarations:
    decl = Declarations()
    for stem in ("chip", "crccl"):
        _parse_pxd((site / "hip" / f"{stem}.pxd").read_text(), decl)
        pyx = (site / "hip" / f"{stem}.pyx").read_text()
        decl.symbols.update(re.findall(r'__init_symbol\(&_(\w+)__funptr,\s*"(\w+)"\)', pyx))
    return decl


def field_width(ctype: str, decl: Declarations) -> int:
    """Bytes of a struct field of (pxd-spelled) type ``ctype`` on LP64."""
    m = re.match(r"^(.*)\[(\d+)\]$", ctype)
    if m:
        return int(m.group(2)) * field_width(m.group(1), decl)
    c = decl.canon(ctype)
    if "*" in c:
        return 8
    c = c.removeprefix("const ")
    sizes = {"char": 1, "unsigned char": 1, "short": 2, "unsigned short": 2, "int": 4,
             "unsigned int": 4, "float": 4, "long": 8, "unsigned long": 8, "long long": 8,
             "unsigned long long": 8, "double": 8, "bool": 1}
    if c not in sizes:
        raise ValueError(f"no width known for field type {ctype!r} ({c!r})")
    return sizes[c]
