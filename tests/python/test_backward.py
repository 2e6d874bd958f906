"""ioattn.attention_backward against the numpy float64 gradients of conftest.py: dense,
causal in both alignments, GQA (dk, dv summed over the query heads of a kv head), sparse
masks with empty rows (which contribute no gradient), every schedule, float32 and float64."""

import numpy as np
import pytest

import ioattn
from conftest import allowed_of, assert_close, make, qkv, reference_backward


def check(q, k, v, dtype, allowed=None, **kw):
    dout = make(q.shape[:3] + (v.shape[3],), dtype, seed=99)
    out, lse = ioattn.attention(q, k, v, return_lse=True, **kw)
    grads = ioattn.attention_backward(dout, q, k, v, out, lse, **kw)
    want = reference_backward(dout, q, k, v, allowed, kw.get("scale"))
    for name, g, w, x in zip(("dq", "dk", "dv"), grads, want, (q, k, v)):
        assert g.shape == x.shape and g.dtype == dtype, name
        assert_close(g, w, dtype, name)
    return grads


@pytest.mark.parametrize("schedule", ["auto", "fused", "materialized", "reference"])
def test_dense_gqa(dtype, schedule):
    q, k, v = qkv(b=2, h=4, g=2, n_q=11, n_k=14, d=6, d_v=4, dtype=dtype)
    check(q, k, v, dtype, schedule=schedule, M=1200)


@pytest.mark.parametrize("n_q,n_k", [(8, 13), (13, 8)])
def test_causal_both_alignments(dtype, n_q, n_k):
    q, k, v = qkv(b=1, h=2, g=1, n_q=n_q, n_k=n_k, d=5, dtype=dtype, seed=2)
    dq, _, _ = check(q, k, v, dtype, allowed_of("causal", n_q, n_k), causal=True)
    if n_q > n_k:  # rows that see nothing get no gradient
        assert np.all(dq[:, :, :n_q - n_k] == 0)


@pytest.mark.parametrize("spec", ["window:2", "global:1+window:1", "strided:3", "causal"])
@pytest.mark.parametrize("schedule", ["fused", "materialized"])
def test_sparse(dtype, spec, schedule):
    q, k, v = qkv(b=1, h=4, g=2, n_q=12, n_k=15, d=6, dtype=dtype, seed=3)
    check(q, k, v, dtype, allowed_of(spec, 12, 15), mask=spec, schedule=schedule, M=1400)


def test_empty_rows_and_unseen_keys(dtype):
    allowed = allowed_of("window:2", 10, 10)
    allowed[[1, 7]] = False
    allowed[:, 4] = False
    q, k, v = qkv(b=1, h=2, g=2, n_q=10, n_k=10, d=4, dtype=dtype, seed=4)
    dq, dk, dv = check(q, k, v, dtype, allowed, mask=allowed)
    assert np.all(dq[:, :, [1, 7]] == 0)
    assert np.all(dk[:, :, 4] == 0) and np.all(dv[:, :, 4] == 0)
    assert np.all(np.isfinite(dq)) and np.all(np.isfinite(dk))


def test_explicit_scale(dtype):
    q, k, v = qkv(b=1, h=1, g=1, n_q=6, n_k=6, d=3, dtype=dtype, seed=5)
    check(q, k, v, dtype, scale=1.7)
