"""The job cache: what a later controller needs to re-attach to a running job
(``JobTrait.dump`` / ``dumps``, ``job_load`` / ``job_loads``, and
``state(cached_path=...)``).

A cache is one JSON document, ``{"format": "monarch_cy.job/1", ...}``, in one of two
forms:

* monarch_cy's own job types (``ProcessJob``, ``LocalJob``, ``BatchJob`` of one of
  them, the SPMD jobs; registered here with :func:`register`): ``{"type": NAME,
  "state": {...}}``, what the type's ``_cache_state()`` returned (its specification
  and, for a running job, the agents' addresses, their pids and the secret their
  links use).  Loading one runs no code: ``type`` must name a registered type
  (nothing else is imported).
* any other ``JobTrait`` subclass (a scheduler of the user's own, as Monarch lets
  programs add): ``{"pickled": {"class": "module.QualName", "data": BASE64, "mac":
  HEX}}``: the job pickled as Monarch pickles it (its class by reference: it must
  be importable where the cache is loaded), signed with an HMAC-SHA256 under this
  user's secret (:mod:`monarch_cy._transport.user_secret`).  It is unpickled only
  when that signature holds, so only bytes this user's own ``dump``/``dumps`` made
  are ever unpickled: a document changed after it was written, or written by another
  user (or on a machine that does not share this user's secret) is refused with a
  ``ValueError`` naming where it came from.

Because it holds secrets, a cache file is written mode 0600, atomically (a temporary
file renamed over it), following a symlink at the path as Monarch's ``dump`` does.
It is read only when it is a regular file owned by this user and not writable by
group or others: a file another user could have written could point this controller
at agents of that user's choosing.  A missing file, one that is not a monarch_cy job
cache, or one that fails those checks raises an error naming the path.  (A
:class:`~.slurm.SlurmJob` keeps its own cache format, :mod:`.slurm_cache`, and
re-attaches through ``SlurmJob.state(cached_path=...)``.)
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import pickle
import stat

__all__ = ["FORMAT", "encode", "job_loads", "job_load", "load_if_present", "write",
           "remove", "register", "NotJSON", "encode_json"]

FORMAT = "monarch_cy.job/1"

_TYPES = {}            # name -> class with _from_cache(state)


def register(cls):
    """Make ``cls`` (a job type with ``_cache_state`` / ``_from_cache``) loadable."""
    _TYPES[cls.__name__] = cls
    return cls


def _ensure_types() -> None:
    # the job types register themselves when their modules load
    from monarch_cy._hosts import local_jobs, spmd_job  # noqa: F401


class NotJSON(TypeError):
    """A registered job type's ``_cache_state`` cannot describe this job in JSON
    (a ``BatchJob`` around a job type of the user's own): it is pickled instead."""


_LABEL = b"job cache"


def encode(job) -> bytes:
    """The cache document of ``job`` (bytes; see the module docstring)."""
    data = encode_json(job)
    return data if data is not None else _encode_pickled(job)


def encode_json(job) -> bytes | None:
    """The JSON form of ``job`` when its exact type is registered and can describe
    it (else None: it is pickled)."""
    _ensure_types()
    name = type(job).__name__
    if _TYPES.get(name) is not type(job):
        return None
    try:
        doc = {"format": FORMAT, "type": name, "state": job._cache_state()}
    except NotJSON:
        return None
    return json.dumps(doc, indent=1, sort_keys=True).encode()


def _encode_pickled(job) -> bytes:
    from monarch_cy._transport.user_secret import mac  # deferred: only custom job types
    try:
        data = pickle.dumps(job, protocol=5)
    except Exception as e:
        raise TypeError(f"a {type(job).__name__} cannot be dumped to a job cache: it "
                        f"does not pickle ({type(e).__name__}: {e})") from None
    cls = type(job)
    doc = {"format": FORMAT, "pickled": {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "data": base64.b64encode(data).decode("ascii"),
        "mac": mac(_LABEL, data).hex()}}
    return json.dumps(doc, indent=1, sort_keys=True).encode()


def _decode_pickled(doc: dict, where: str):
    from monarch_cy._transport.user_secret import mac  # deferred: only custom job types
    p = doc.get("pickled")
    try:
        data = base64.b64decode(p["data"], validate=True)
        given = bytes.fromhex(p["mac"])
        cls = str(p["class"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{where} holds a malformed pickled job") from None
    if not hmac.compare_digest(mac(_LABEL, data), given):
        raise ValueError(
            f"{where} fails its integrity check: it was changed after it was written, "
            "or written by another user or on a machine that does not share this "
            "user's secret; refusing to unpickle it")
    try:
        return pickle.loads(data)
    except Exception as e:
        raise ValueError(f"{where} holds a job of class {cls} that cannot be loaded "
                         f"here ({type(e).__name__}: {e})") from None


def job_loads(data: bytes):
    """The job in a cache document made by ``dumps()``.  ``ValueError`` when
    ``data`` is not one, or is a pickled job whose signature does not hold (module
    docstring); a registered job type is read from JSON alone, no code runs.  The
    document may hold a secret: keep it as private as the cache file."""
    return _decode(data, "the data given to job_loads")


def _decode(data, where: str):
    if isinstance(data, str):
        data = data.encode()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"job_loads takes the bytes of a job cache, not "
                        f"{type(data).__name__}")
    try:
        doc = json.loads(bytes(data))
        ok = isinstance(doc, dict) and doc.get("format") == FORMAT
    except ValueError:
        ok = False
    if not ok:
        hint = ""
        try:
            if json.loads(bytes(data)).get("format", "").startswith("monarch_cy.SlurmJob"):
                hint = ("; it is a SlurmJob state: re-attach with "
                        "SlurmJob(...).state(cached_path=...)")
        except Exception:
            pass
        raise ValueError(f"{where} is not a monarch_cy job cache ({FORMAT}){hint}")
    if "pickled" in doc:
        return _decode_pickled(doc, where)
    _ensure_types()
    cls = _TYPES.get(doc.get("type"))
    if cls is None or not isinstance(doc.get("state"), dict):
        raise ValueError(f"{where} names an unknown job type {doc.get('type')!r} "
                         f"(known: {sorted(_TYPES)})")
    try:
        return cls._from_cache(doc["state"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{where} holds a malformed {cls.__name__} state: "
                         f"{e!r}") from None


def _check_trusted(path: str, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"job cache {path!r} is not a regular file")
    if st.st_uid != os.getuid():
        raise PermissionError(f"job cache {path!r} belongs to another user "
                              f"(uid {st.st_uid}); refusing to use it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(f"job cache {path!r} is writable by group or others "
                              f"(mode {stat.S_IMODE(st.st_mode):o}); refusing to use "
                              "it: chmod 600 it if you trust its contents")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:       # FileNotFoundError names the path
        _check_trusted(path, os.fstat(f.fileno()))
        return f.read()


def job_load(filename: str = ".monarch/job_state.pkl"):
    """The job cached at ``filename`` (default ``DEFAULT_JOB_PATH``).
    ``FileNotFoundError`` for a missing file, ``ValueError`` for one that is not
    a monarch_cy job cache, ``PermissionError`` for one this user does not own or
    others can write; each names the path."""
    if not isinstance(filename, (str, os.PathLike)):
        raise TypeError(f"job_load takes a path, not {filename!r}")
    filename = os.fspath(filename)
    try:
        data = _read(filename)
    except FileNotFoundError:
        raise FileNotFoundError(f"no job cache at {filename!r}") from None
    return _decode(data, f"job cache {filename!r}")


def load_if_present(path: str):
    """The job cached at ``path``, or None when there is no file there."""
    try:
        return job_load(path)
    except FileNotFoundError:
        return None


def _target(path: str) -> str:
    return os.path.realpath(path) if os.path.islink(path) else path


def write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path``, mode 0600, atomically."""
    target = _target(path)
    d = os.path.dirname(os.path.abspath(target))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{os.path.basename(target)}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def remove(path: str) -> None:
    """Remove the file at ``path`` (the symlink's target, keeping the link)."""
    try:
        os.remove(_target(path))
    except OSError:
        pass
