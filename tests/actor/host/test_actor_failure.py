"""An actor's failure in its proc (monarch_cy._actor.host.actor_failure): Monarch's
texts, and the proc refusing new actors once one of its actors failed."""

from __future__ import annotations

import pytest

from _polling import wait_until
from monarch_cy.actor import Actor, SupervisionError, context, endpoint, this_host


class Fatal(BaseException):
    pass


class A(Actor):
    @endpoint
    def die(self):
        raise Fatal("fatal")

    @endpoint
    def ok(self):
        return "alive"

    @endpoint
    def abort(self, reason=None):
        context().actor_instance.abort(reason) if reason != "omit" else \
            context().actor_instance.abort()


@pytest.mark.parametrize("reason,text", [
    (None, "actor explicitly aborted due to: (no reason provided)"),
    ("omit", "actor explicitly aborted due to: (no reason provided)"),
    ("tired", "actor explicitly aborted due to: tired"),
])
def test_abort_texts(procs, name, hook, reason, text):
    a = procs.slice(gpus=0).spawn(name, A)
    try:
        a.abort.call_one(reason).get(20)
    except SupervisionError:
        pass                          # the reply races the failure, as in Monarch
    assert wait_until(lambda: hook)
    assert hook[0].report().splitlines()[1].strip() == text


def test_a_proc_where_an_actor_failed_takes_no_new_actors(hook):
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        a = pm.spawn("a", A)
        with pytest.raises(SupervisionError, match="fatal"):
            a.slice(gpus=0).die.call_one().get(20)
        b = pm.spawn("b", A)                        # returns at once, as always
        with pytest.raises(RuntimeError, match="error spawning actor mesh: Cannot spawn "
                                               "new actors on mesh with supervision "
                                               "events") as e:
            b.initialized.get(20)
        assert not isinstance(e.value, SupervisionError)   # the spawn's, not a failure
        with pytest.raises(RuntimeError, match="error spawning actor mesh"):
            b.slice(gpus=0).ok.call_one().get(20)
        assert b.slice(gpus=1).ok.call_one().get(20) == "alive"    # the other proc
        assert pm.slice(gpus=1).spawn("c", A).initialized.get(20) is None
        assert wait_until(lambda: hook)
        assert len(hook) == 1 and "fatal" in hook[0].report()   # only the failure
    finally:
        pm.stop().get(30)
