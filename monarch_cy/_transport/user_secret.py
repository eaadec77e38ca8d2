"""The user's secret: what a worker and a controller of one user share when nobody
gave them a job secret.

Monarch's own tests and scripts start workers with nothing but an address::

    python -c 'from monarch.actor import run_worker_loop_forever
    run_worker_loop_forever(address="ipc:///tmp/w0", ca="trust_all_connections")'

and attach to them with ``attach_to_workers(workers=[...])``.  monarch_cy keeps
every connection authenticated (CurveZMQ keys derived from a 32-byte secret), so
both ends need one secret without a step Monarch's users do not take.  When neither
``MONARCH_CY_JOB_SECRET_FILE`` nor ``MONARCH_CY_JOB_SECRET`` is set, both read this
user's secret: 32 random bytes (64 hex digits) in ``~/.monarch_cy/user.secret``
(``$TMPDIR``/``monarch_cy-<uid>/user.secret`` where the home directory is not
writable), made on first use.  Only this user can read it:

* the directory is made mode 0700; an existing one must be a real directory (not a
  symbolic link) owned by this user and writable by nobody else;
* the file is made mode 0600, complete before it appears (written under a temporary
  name, then hard-linked into place, so two processes racing to make it agree on the
  winner's); it is read without following a symbolic link and only when it is a
  regular file owned by this user that group and others can neither read nor write.

A check that fails raises ``PermissionError`` naming the path, never the value.  A
home directory shared between machines (NFS) gives the same secret on each; for
workers on machines that do not share it, set ``MONARCH_CY_JOB_SECRET_FILE`` on every
side (docs/multihost.md).

The same secret also signs this user's job caches (:mod:`monarch_cy._hosts.job_cache`):
:func:`mac` is an HMAC-SHA256 under a label.
"""

from __future__ import annotations

import hmac
import os
import stat
import tempfile

__all__ = ["user_secret", "user_secret_path", "mac"]

_NAME = "user.secret"


def _candidates() -> list[str]:
    home = os.path.expanduser("~")
    out = []
    if home and home != "~" and os.path.isdir(home):
        out.append(os.path.join(home, ".monarch_cy"))
    out.append(os.path.join(tempfile.gettempdir(), f"monarch_cy-{os.getuid()}"))
    return out


def _check_dir(path: str) -> None:
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise PermissionError(f"{path!r} is not a directory (a symbolic link?); the "
                              "user's secret is kept only in a real directory")
    if st.st_uid != os.getuid():
        raise PermissionError(f"directory {path!r} belongs to another user (uid "
                              f"{st.st_uid}); refusing to keep the user's secret there")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(f"directory {path!r} is writable by group or others (mode "
                              f"{stat.S_IMODE(st.st_mode):o}); chmod 700 it")


def _usable_dir() -> str:
    """The first candidate directory that exists (checked) or can be made."""
    errors = []
    for d in _candidates():
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError as e:          # a read-only home: try the next one
            errors.append(f"{d}: {e.strerror}")
            continue
        _check_dir(d)
        return d
    raise PermissionError("cannot make a directory for the user's secret ("
                          + "; ".join(errors) + ")")


def user_secret_path() -> str:
    """Where this user's secret is (or will be) kept."""
    return os.path.join(_usable_dir(), _NAME)


def _read(path: str) -> bytes | None:
    """The secret at ``path``; None when there is no file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:               # ELOOP: a symbolic link
        raise PermissionError(f"cannot open the user's secret {path!r}: {e.strerror} "
                              "(a symbolic link is refused)") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise PermissionError(f"the user's secret {path!r} is not a regular file")
        if st.st_uid != os.getuid():
            raise PermissionError(f"the user's secret {path!r} belongs to another user "
                                  f"(uid {st.st_uid}); refusing to use it")
        if st.st_mode & 0o077:
            raise PermissionError(
                f"the user's secret {path!r} is open to group or others (mode "
                f"{stat.S_IMODE(st.st_mode):o}), so it may be known: remove the file "
                "(a new one is made) or chmod 600 it if nobody else could read it")
        text = f.read().decode("ascii", "replace").strip()
    try:
        if len(text) != 64:
            raise ValueError
        return bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"the user's secret {path!r} is not 64 hex digits; remove the "
                         "file (a new one is made)") from None


def _make(path: str) -> None:
    """Put a fresh secret at ``path`` unless another process did first."""
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(32).hex() + "\n")      # as secret.new_secret
        try:
            os.link(tmp, path)          # appears complete, or not at all
        except FileExistsError:
            pass                        # another process made it: theirs is used
    finally:
        os.unlink(tmp)


def user_secret() -> bytes:
    """This user's 32-byte secret (made on first use; see the module docstring)."""
    path = user_secret_path()
    secret = _read(path)
    if secret is None:
        _make(path)
        secret = _read(path)
    return secret


def mac(label: bytes, data: bytes) -> bytes:
    """HMAC-SHA256 of ``data`` under this user's secret and ``label``."""
    key = hmac.digest(user_secret(), b"monarch_cy " + label, "sha256")
    return hmac.digest(key, data, "sha256")
