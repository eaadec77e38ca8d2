"""``monarch-cy train``: fault-tolerant single-controller data-parallel training (re-exports only).

>>> from monarch_cy.train import TrainConfig, FaultSpec, train
>>> summary = train(TrainConfig(procs=4, steps=100, faults=(FaultSpec(rank=1, step=40),)))

See docs/train.md.
"""

from monarch_cy._train.config import FaultSpec, TrainConfig
from monarch_cy._train.controller import TrainingRun, train

__all__ = ["TrainConfig", "FaultSpec", "TrainingRun", "train"]
