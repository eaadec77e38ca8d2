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


def test_supervision_error_while_handling_another_pickles_whole():
    """The "while handling another failure" form keeps its context through pickling
    (a subclass without it, e.g. OwnerDiedError, pickles with its own arguments)."""
    import pickle
    e = SupervisionError("p", 0, "RuntimeError: supervise raised", "p.f()", "<root>.<P p>",
                         during="The actor <root>.<P p>.<C c> and all its descendants "
                                "have failed:\n  boom")
    back = pickle.loads(pickle.dumps(e))
    assert str(back) == str(e) and back.during == e.during
    assert "\nThis error occurred while handling another failure:\n  The actor" in str(e)
