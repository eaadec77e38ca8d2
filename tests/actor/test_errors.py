import pickle

import pytest

from monarch_cy._errors import MonarchCyError
from monarch_cy.actor import ActorError, MeshIndexError, MeshStoppedError, SupervisionError


@pytest.mark.parametrize("err", [
    ActorError(ValueError("x"), "Traceback...\nValueError: x", "m", 3, "ep"),
    ActorError(None, "tb", "", None, ""),
    SupervisionError("m", 2, "process exited with code 7"),
    MeshStoppedError("m", None, "stopped"),
    MeshIndexError("index gpus=9 is out of range"),
])
def test_errors_pickle(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert isinstance(back, MonarchCyError)
    for attr in ("remote_traceback", "actor", "rank", "cause", "endpoint", "message"):
        if hasattr(err, attr):
            assert getattr(back, attr) == getattr(err, attr)


def test_error_hierarchy():
    assert issubclass(MeshIndexError, IndexError) and issubclass(MeshIndexError, ValueError)
    assert issubclass(MeshStoppedError, SupervisionError)
    e = pickle.loads(pickle.dumps(ActorError(ValueError("x"), "tb")))
    assert isinstance(e.exception, ValueError)
