"""Run inside the trixie chroot by test_rccl_chroot.py with trixie's python3 (3.13).

monarch_cy's own loader (``_nccl_loader``) and flat tier (``_nccl_shim``, compiled
for 3.13 from the same .pyx) bind Debian's librccl1 and call it; prints one JSON
object.  Two bindings: the loader's own search (platform "rocm" from
MONARCH_CY_GPU_PLATFORM, system soname librccl.so.1), then MONARCH_CY_NCCL_LIBRARY.
"""

import json
import os
import pickle

from monarch_cy import _nccl_shim as s
from monarch_cy._collectives import _nccl_loader as L
from monarch_cy.collectives import NcclError, UniqueId


def binding(b):
    return {"platform": b.platform, "path": b.path, "source": b.source, "version": b.version,
            "version_text": b.version_text, "library": b.library,
            "missing_optional": sorted(b.missing_optional)}


out = {"search": binding(L.ensure_loaded())}
out["shim_version"] = s.getVersion()
out["has"] = {n: s.has(n) for n in ("CommInitRankConfig", "CommSplit", "AllReduce", "GetLastError")}
a, c = s.getUniqueId(), s.getUniqueId()
out["uid"] = {"len": len(a), "distinct": a != c, "nonzero": any(a)}
u = UniqueId.generate()
out["uid_pickles"] = pickle.loads(pickle.dumps(u)) == u and len(u.raw) == 128
try:
    s.commInitRank(1, a, 0)
    out["init"] = None
except NcclError as e:
    e2 = pickle.loads(pickle.dumps(e))
    out["init"] = {"type": type(e2).__name__, "result": e2.result, "name": e2.name, "call": e2.call,
                   "message": e2.message, "last_error": e2.last_error, "text": str(e2)}
try:  # an optional function RCCL 2.13 lacks: a clear NcclUnavailable, not a crash
    s.commInitRankConfig(1, a, 0, False)
    out["config"] = None
except Exception as e:  # noqa: BLE001
    out["config"] = {"type": type(e).__name__, "text": str(e)}
L.reset()
os.environ[L.ENV_LIBRARY] = os.environ["RCCL_PATH"]
out["env"] = binding(L.ensure_loaded())
print(json.dumps(out))
