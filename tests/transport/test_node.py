"""monarch_cy._transport.node: the node's lifetime (close, finalizer, fork)."""

from __future__ import annotations

import gc
import os

import pytest

from monarch_cy._transport.auth import JobKeys
from monarch_cy._transport.node import Node


def _node(tmp_path, name="n"):
    return Node(f"unix://{tmp_path}/{name}", JobKeys(), rundir=str(tmp_path),
                is_controller=False)


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_close_is_idempotent_and_removes_its_socket_files(tmp_path):
    node = _node(tmp_path)
    wake = node._wake_fd
    assert (tmp_path / "n").exists() and node.closed is False
    node.close()
    node.close()
    assert node.closed and not _fd_open(wake)
    assert not (tmp_path / "n").exists() and not (tmp_path / "nd").exists()


def test_a_dropped_node_closes_its_fds(tmp_path):
    node = _node(tmp_path)
    wake, inbox = node._wake_fd, node._inbox_fd
    del node
    gc.collect()
    assert not _fd_open(wake) and not _fd_open(inbox)


@pytest.mark.timeout(60)
def test_close_in_a_forked_child_frees_nothing_of_the_parents(tmp_path):
    node = _node(tmp_path)
    pid = os.fork()
    if pid == 0:                      # the child: closing must not touch the parent's
        try:
            node.close()
        finally:
            os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert (tmp_path / "n").exists() and _fd_open(node._wake_fd)
    node.close()
    assert not (tmp_path / "n").exists()
