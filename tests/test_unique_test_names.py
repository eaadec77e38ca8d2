"""Test files are imported by basename (pytest's default import mode, no packages):
two test files with one name in different folders break collection of the suite."""

import collections
import pathlib


def test_test_file_basenames_are_unique():
    root = pathlib.Path(__file__).parent
    names = collections.Counter(p.name for p in root.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
