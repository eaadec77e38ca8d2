"""The job secret: made once per job, passed to procs, read by host agents.

The controller makes it (:func:`new_secret`, 32 random bytes) when its node starts
(:class:`monarch_cy._transport.auth.JobKeys` derives the keys); the procs it starts
get it in their start-up config, never on a command line.  Agents authenticate exactly like procs: a CurveZMQ keypair derived from the job's
32-byte secret (:class:`monarch_cy._transport.auth.JobKeys`).  An agent started by hand
or by a scheduler reads that secret from

1. a file named by ``--secret-file`` (or ``MONARCH_CY_JOB_SECRET_FILE``): 64 hex
   digits, surrounding whitespace ignored; the file should be mode 0600;
2. else the environment variable ``MONARCH_CY_JOB_SECRET`` (64 hex digits).

Never a command line (``ps`` shows those to every user).  Errors name the source,
never the value.  Where neither is set, a worker loop and ``attach_to_workers`` use
:func:`default_secret`: this user's secret (:mod:`.user_secret`), so that workers
started with nothing but an address, as Monarch's are, authenticate their
controllers all the same.
"""

from __future__ import annotations

import os
import stat

from monarch_cy import _config

__all__ = ["ENV", "ENV_FILE", "load_secret", "parse_secret", "write_secret_file",
           "new_secret", "default_secret", "configured"]

ENV = "MONARCH_CY_JOB_SECRET"
ENV_FILE = "MONARCH_CY_JOB_SECRET_FILE"


def new_secret() -> bytes:
    """A fresh job secret: 32 bytes from the OS's CSPRNG."""
    return os.urandom(32)


def parse_secret(text: str, where: str) -> bytes:
    """The 32 bytes of ``text`` (64 hex digits); ``ValueError`` naming ``where``."""
    t = text.strip()
    if len(t) != 64:
        raise ValueError(f"the job secret in {where} must be 64 hex digits, "
                         f"found {len(t)} characters")
    try:
        return bytes.fromhex(t)
    except ValueError:
        raise ValueError(f"the job secret in {where} is not hexadecimal") from None


def load_secret(path: str | None = None) -> bytes:
    """The job secret from ``path``, else ``$MONARCH_CY_JOB_SECRET_FILE``, else
    ``$MONARCH_CY_JOB_SECRET``; ``ValueError`` saying where it looked."""
    path = path or _config.job_secret_file()
    if path:
        try:
            st = os.stat(path)
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise ValueError(f"cannot read the job secret file {path!r}: "
                             f"{e.strerror}") from None
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            import logging
            logging.getLogger("monarch_cy.hosts").warning(
                "job secret file %s is readable by others (mode %o); chmod 600 it",
                path, st.st_mode & 0o777)
        return parse_secret(text, f"file {path!r}")
    text = _config.job_secret()
    if text is None:
        raise ValueError(f"no job secret: pass --secret-file PATH, or set {ENV_FILE} "
                         f"(a file) or {ENV} (64 hex digits)")
    return parse_secret(text, f"${ENV}")


def configured() -> bool:
    """Whether a job secret is set in this process's environment."""
    return bool(_config.job_secret_file() or _config.job_secret() is not None)


def default_secret(path: str | None = None) -> bytes:
    """:func:`load_secret` when a secret is named (``path``, the variables), else this
    user's secret (:func:`.user_secret.user_secret`)."""
    if path or configured():
        return load_secret(path)
    from monarch_cy._transport.user_secret import user_secret  # deferred: only here
    return user_secret()


def write_secret_file(path: str, secret: bytes) -> str:
    """Write ``secret`` as hex to a new file ``path`` with mode 0600 (fails if it
    exists); returns ``path``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret.hex() + "\n")
    return path
