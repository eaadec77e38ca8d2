"""The training job's model, flat state and data, without any mesh."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from monarch_cy._train.data import CharDataset, make_corpus
from monarch_cy._train.model import CharGPT, FlatState, ModelConfig, cosine_lr


def test_corpus_and_batches_are_deterministic():
    assert make_corpus(3, 20_000) == make_corpus(3, 20_000)
    assert make_corpus(3, 20_000) != make_corpus(4, 20_000)
    ds = CharDataset(0, 50_000)
    x1, y1 = ds.batch(7, 2, 4, 32)
    x2, y2 = ds.batch(7, 2, 4, 32)
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert not np.array_equal(x1, ds.batch(7, 3, 4, 32)[0])      # other rank, other data
    assert np.array_equal(x1[:, 1:], y1[:, :-1])                   # targets are shifted inputs
    assert x1.shape == (4, 32) and 0 <= x1.min() and x1.max() < ds.vocab_size
    with pytest.raises(ValueError, match="step"):
        ds.batch(-1, 0, 1, 8)


def test_flat_state_is_the_model():
    torch.manual_seed(0)
    m = CharGPT(ModelConfig(vocab_size=20, block=8, layers=1, heads=2, width=16))
    st = FlatState(m, lr=1e-2)
    assert st.numel == sum(p.numel() for p in m.parameters())
    x = torch.randint(0, 20, (2, 8))
    loss = m(x, x)
    loss.backward()
    assert st.grads.abs().sum() > 0                         # backward wrote the flat buffer
    before = m.head.weight.detach().clone()
    st.apply()
    assert not torch.equal(before, m.head.weight)           # the update reached the model
    assert st.step == 1


def test_flat_adamw_matches_torch_adamw():
    # eps is large here on purpose: some gradients of this model are rounding noise
    # (attention key biases have a true gradient of zero), and Adam divides by them.
    torch.manual_seed(1)
    cfg = ModelConfig(vocab_size=12, block=6, layers=1, heads=2, width=8)
    a, b = CharGPT(cfg), CharGPT(cfg)
    b.load_state_dict(a.state_dict())
    st = FlatState(a, lr=3e-3, eps=1e-3, weight_decay=0.01)
    opt = torch.optim.AdamW(b.parameters(), lr=3e-3, betas=(0.9, 0.95), eps=1e-3, weight_decay=0.01)
    for i in range(5):
        x = torch.randint(0, 12, (3, 6), generator=torch.Generator().manual_seed(i))
        st.grads.zero_()
        a(x, x).backward()
        st.apply()
        opt.zero_grad()
        b(x, x).backward()
        opt.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)


def test_checksum_tracks_every_buffer():
    torch.manual_seed(2)
    m = CharGPT(ModelConfig(vocab_size=10, block=4, layers=1, heads=1, width=8))
    st = FlatState(m, lr=1e-3)
    c0 = st.checksum()
    assert c0 == st.checksum()
    st.exp_avg_sq[3] += 1
    assert st.checksum() != c0
    st.exp_avg_sq[3] -= 1
    st.step += 1
    assert st.checksum() != c0


def test_config_and_schedule_validation():
    with pytest.raises(ValueError, match="width"):
        ModelConfig(vocab_size=10, width=10, heads=4)
    with pytest.raises(ValueError, match="layers"):
        ModelConfig(vocab_size=10, layers=0)
    assert cosine_lr(1.0, 0, 100) == pytest.approx(0.1)
    assert cosine_lr(1.0, 100, 100) == pytest.approx(0.1)
    assert cosine_lr(1.0, 10, 100) == pytest.approx(1.0)
