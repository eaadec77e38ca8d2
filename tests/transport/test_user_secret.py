"""The user's secret (monarch_cy._transport.user_secret): what a worker loop and a
controller share when no job secret is set; made once, private, and refused when it
or its directory could have been read or swapped by someone else."""

from __future__ import annotations

import os
import stat

import pytest

from monarch_cy._transport import user_secret as us
from monarch_cy._transport.secret import default_secret


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MONARCH_CY_JOB_SECRET", raising=False)
    monkeypatch.delenv("MONARCH_CY_JOB_SECRET_FILE", raising=False)
    return tmp_path


def test_made_once_private_and_used_when_no_job_secret_is_set(home, monkeypatch):
    s = us.user_secret()
    path = home / ".monarch_cy" / "user.secret"
    assert len(s) == 32 and us.user_secret_path() == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert us.user_secret() == s and default_secret() == s       # the same each time
    job = os.urandom(32)
    monkeypatch.setenv("MONARCH_CY_JOB_SECRET", job.hex())
    assert default_secret() == job                               # a job secret wins
    # the signature of a job cache: keyed by the secret and the label
    assert us.mac(b"a", b"data") != us.mac(b"b", b"data")
    assert len(us.mac(b"a", b"data")) == 32


def test_another_home_has_another_secret(home, tmp_path_factory, monkeypatch):
    first = us.user_secret()
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("other")))
    assert us.user_secret() != first


def test_a_secret_others_could_read_is_refused_naming_the_path(home):
    us.user_secret()
    path = home / ".monarch_cy" / "user.secret"
    os.chmod(path, 0o640)
    with pytest.raises(PermissionError, match=f"{path}.*open to group or others"):
        us.user_secret()


def test_a_symlink_is_refused(home):
    d = home / ".monarch_cy"
    d.mkdir(mode=0o700)
    target = home / "elsewhere"
    target.write_text("00" * 32)
    os.chmod(target, 0o600)
    (d / "user.secret").symlink_to(target)
    with pytest.raises(PermissionError, match="symbolic link"):
        us.user_secret()


def test_a_directory_others_can_write_is_refused(home):
    d = home / ".monarch_cy"
    d.mkdir()
    os.chmod(d, 0o777)
    with pytest.raises(PermissionError, match=f"{d}.*writable by group or others"):
        us.user_secret()


@pytest.mark.skipif(os.getuid() != 0, reason="making a file of another user needs root")
def test_a_file_of_another_user_is_refused(home):
    us.user_secret()
    path = home / ".monarch_cy" / "user.secret"
    os.chown(path, 4321, 4321)
    with pytest.raises(PermissionError, match="belongs to another user"):
        us.user_secret()


def test_racing_makers_agree(home):
    """Two processes making it at once end up with the same secret (the file appears
    complete, and only once)."""
    import subprocess
    import sys
    code = ("from monarch_cy._transport.user_secret import user_secret;"
            "print(user_secret().hex())")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    ps = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                           env=env) for _ in range(4)]
    outs = {p.communicate(timeout=60)[0].strip() for p in ps}
    assert len(outs) == 1 and bytes.fromhex(outs.pop()) == us.user_secret()


def test_a_corrupt_secret_says_how_to_recover(home):
    us.user_secret()
    path = home / ".monarch_cy" / "user.secret"
    path.write_text("not hex")
    with pytest.raises(ValueError, match="not 64 hex digits; remove the file"):
        us.user_secret()
