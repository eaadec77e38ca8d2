"""monarch_cy._checks: the shared argument checks, and a few of the places using them."""

from __future__ import annotations

import re

import numpy as np
import pytest

from monarch_cy._checks import check_bool, check_int, check_number, check_timeout, \
    describe, is_int, is_number


class Index:
    """Not an int, but usable as one (``__index__``), like numpy's integers."""

    def __index__(self):
        return 7


def test_describe():
    assert describe(1.5) == "float 1.5" and describe("x") == "str 'x'"


def test_is_int_is_strict():
    assert is_int(0) and is_int(-3) and is_int(1 << 70)
    for v in (True, False, 1.0, "1", None, np.int64(1), Index()):
        assert not is_int(v), v


def test_check_int_accepts_ints_and_index_types():
    assert check_int("n", 5) == 5
    for v in (np.int64(3), np.uint8(3)):
        got = check_int("n", v)
        assert got == 3 and type(got) is int
    assert check_int("n", Index()) == 7


@pytest.mark.parametrize("value, shown", [(1.5, "float 1.5"), ("3", "str '3'"),
                                          (True, "bool True"), (None, "NoneType None"),
                                          (np.float64(2.0), "float64")])
def test_check_int_wrong_type_is_typeerror_naming_both(value, shown):
    with pytest.raises(TypeError, match=rf"^offset must be an int, got {re.escape(shown)}"):
        check_int("offset", value)


def test_check_int_ranges():
    assert check_int("n", 0, minimum=0) == 0
    with pytest.raises(ValueError, match=r"^nbytes must be >= 0, got -1$"):
        check_int("nbytes", -1, minimum=0)
    with pytest.raises(ValueError, match=r"^n must be <= 9, got 10$"):
        check_int("n", 10, maximum=9)
    with pytest.raises(ValueError, match=r"^length must be in 1\.\.64, got 0$"):
        check_int("length", 0, minimum=1, maximum=64)
    with pytest.raises(ValueError, match=r"^length must be in 1\.\.64, got 65$"):
        check_int("length", 65, minimum=1, maximum=64)
    assert check_int("length", 64, minimum=1, maximum=64) == 64


def test_check_bool_takes_only_true_or_false():
    assert check_bool("flag", True) is True and check_bool("flag", False) is False
    assert check_bool("flag", None, allow_none=True) is None
    for bad, shown in (("no", "str 'no'"), (0, "int 0"), (None, "NoneType None"),
                       (np.bool_(True), "bool")):
        with pytest.raises(TypeError, match=re.escape(f"flag must be True or False, got {shown}")):
            check_bool("flag", bad)
    with pytest.raises(TypeError, match="flag must be True or False or None, got str 'x'"):
        check_bool("flag", "x", allow_none=True)


def test_is_number():
    assert is_number(0) and is_number(2.5) and is_number(float("inf"))
    for v in (True, float("nan"), "1", None, 1j):
        assert not is_number(v), v


def test_check_number():
    assert check_number("factor", 2, minimum=1) == 2.0
    with pytest.raises(ValueError, match=r"^factor must be a number >= 1, got 0\.5$"):
        check_number("factor", 0.5, minimum=1)
    with pytest.raises(ValueError, match=r"^delay must be a number >= 0, got True$"):
        check_number("delay", True, minimum=0)


def test_check_timeout_positive():
    assert check_timeout("timeout", 3) == 3.0 and type(check_timeout("timeout", 3)) is float
    assert check_timeout("timeout", float("inf")) == float("inf")
    for bad in (0, -1, float("nan"), True, "5", None):
        with pytest.raises(ValueError, match=rf"^timeout must be a positive number of "
                                             rf"seconds, got {re.escape(repr(bad))}$"):
            check_timeout("timeout", bad)


def test_check_timeout_zero_and_none():
    assert check_timeout("t", 0, allow_zero=True) == 0.0
    assert check_timeout("t", None, allow_none=True) is None
    with pytest.raises(ValueError, match=r"^t must be a number of seconds >= 0 or None, "
                                         r"got -1$"):
        check_timeout("t", -1, allow_zero=True, allow_none=True)
    with pytest.raises(ValueError, match=r"^t must be a positive number of seconds, got None$"):
        check_timeout("t", None)


# --------------------------------------------------------- places that use the checks

def test_gpu_byte_counts():
    from monarch_cy._gpu._memory import _nbytes
    assert _nbytes(np.int32(8)) == 8
    with pytest.raises(ValueError, match="nbytes must be >= 0, got -1"):
        _nbytes(-1)
    with pytest.raises(TypeError, match="offset must be an int, got float 1.5"):
        _nbytes(1.5, "offset")
    with pytest.raises(ValueError, match="nbytes is too large"):
        _nbytes(1 << 63)


def test_verbs_records_and_ranges():
    from monarch_cy._verbs._memory import _int_arg
    from monarch_cy._verbs._records import _check_uint
    assert _int_arg("addr", 5, 1, 10) == 5
    with pytest.raises(ValueError, match=r"addr must be in 1\.\.10, got 0"):
        _int_arg("addr", 0, 1, 10)
    with pytest.raises(TypeError, match="lkey must be an int, got bool True"):
        _check_uint("lkey", True, 32)
    with pytest.raises(ValueError, match="psn must fit in 24 unsigned bits"):
        _check_uint("psn", 1 << 24, 24)


def test_attach_to_workers_timeout():
    from monarch_cy._hosts.attach import attach_to_workers
    for bad in (0, True, "5"):
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
            attach_to_workers(workers=["tcp://a:1"], timeout=bad)


def test_strict_int_places_refuse_bools():
    from monarch_cy._collectives._rendezvous import TcpRendezvous
    from monarch_cy._hosts.job import check_meshes
    with pytest.raises(ValueError, match="port must be an int in 1..65535, got True"):
        TcpRendezvous("h", True)
    with pytest.raises(ValueError, match=r"meshes\['a'\] must be a positive number of hosts"):
        check_meshes({"a": True})
