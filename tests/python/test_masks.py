"""Masks: every pattern family against its definition (conftest.allowed_of) and against the
reference, masks from each source (spec string, Mask, Matrix Market file, CSR arrays,
scipy.sparse, boolean arrays) giving the same results, the Mask API (nnz, shape, to_scipy,
& and |), fully masked rows (out 0, lse -inf), and causal=True with a mask."""

import numpy as np
import pytest
import scipy.sparse

import ioattn
from conftest import allowed_of, assert_close, qkv, reference

N_Q, N_K = 19, 23

DETERMINISTIC = ["dense", "causal", "window:3", "causal-window:4", "dilated:2:3", "global:2",
                 "strided:4"]


def dense_of(mask):
    return mask.to_scipy().toarray()


@pytest.mark.parametrize("spec", DETERMINISTIC)
@pytest.mark.parametrize("n_q,n_k", [(N_Q, N_K), (N_K, N_Q)])
def test_pattern_families(dtype, spec, n_q, n_k):
    want_allowed = allowed_of(spec, n_q, n_k)
    m = ioattn.Mask(spec, (n_q, n_k))
    assert np.array_equal(dense_of(m), want_allowed)
    assert m.nnz == want_allowed.sum() and m.shape == (n_q, n_k)
    q, k, v = qkv(n_q=n_q, n_k=n_k, dtype=dtype, seed=1)
    want, want_lse, _ = reference(q, k, v, want_allowed)
    for schedule in ("fused", "materialized"):
        out, lse = ioattn.attention(q, k, v, mask=spec, schedule=schedule, M=800,
                                    return_lse=True)
        assert_close(out, want, dtype, f"{spec} {schedule}")
        assert_close(lse, want_lse, dtype, f"{spec} {schedule} lse")


def test_union_and_intersection():
    a = allowed_of("window:2", N_Q, N_K)
    b = allowed_of("global:1", N_Q, N_K)
    c = allowed_of("causal", N_Q, N_K)
    assert np.array_equal(dense_of(ioattn.Mask("window:2+global:1", (N_Q, N_K))), a | b)
    assert np.array_equal(dense_of(ioattn.Mask("window:2+global:1&causal", (N_Q, N_K))),
                          a | (b & c))  # & binds tighter than +
    wa, gb = ioattn.Mask("window:2", (N_Q, N_K)), ioattn.Mask("global:1", (N_Q, N_K))
    assert np.array_equal(dense_of(wa | gb), a | b)
    assert np.array_equal(dense_of(wa & gb), a & b)


@pytest.mark.parametrize("spec", ["bigbird:2:1:3", "block:4:0.5", "random:0.3"])
def test_random_families(dtype, spec):
    m = ioattn.Mask(spec, (N_Q, N_K), seed=5)
    allowed = dense_of(m)
    assert m == ioattn.Mask(spec, (N_Q, N_K), seed=5)  # seeded
    assert not np.array_equal(allowed, dense_of(ioattn.Mask(spec, (N_Q, N_K), seed=6)))
    if spec.startswith("bigbird"):  # window:2 + global:1 + 3 random keys per row
        base = allowed_of("window:2", N_Q, N_K) | allowed_of("global:1", N_Q, N_K)
        assert np.all(allowed[base])
        extra = (allowed & ~base).sum(axis=1)
        assert np.array_equal(extra, np.minimum(3, (~base).sum(axis=1)))
    if spec.startswith("block"):  # whole 4 x 4 blocks anchored at (0, 0)
        for i0 in range(0, N_Q, 4):
            for j0 in range(0, N_K, 4):
                blk = allowed[i0:i0 + 4, j0:j0 + 4]
                assert blk.all() or not blk.any()
    q, k, v = qkv(n_q=N_Q, n_k=N_K, dtype=dtype, seed=2)
    want, want_lse, _ = reference(q, k, v, allowed)
    out, lse = ioattn.attention(q, k, v, mask=m, return_lse=True)
    assert_close(out, want, dtype, spec)
    assert_close(lse, want_lse, dtype, spec)


def sources(tmp_path):
    """The same allowed pairs (with empty rows 0 and 5) from every source a mask can have."""
    allowed = allowed_of("window:3", N_Q, N_K) | allowed_of("global:1", N_Q, N_K)
    allowed[[0, 5]] = False
    csr = scipy.sparse.csr_matrix(allowed)
    path = tmp_path / "mask.mtx"
    rows, cols = np.nonzero(allowed)
    path.write_text("%%MatrixMarket matrix coordinate pattern general\n"
                    f"{N_Q} {N_K} {rows.size}\n" +
                    "".join(f"{i + 1} {j + 1}\n" for i, j in zip(rows, cols)))
    return allowed, {
        "Mask.from_dense": ioattn.Mask.from_dense(allowed),
        "Mask.from_csr": ioattn.Mask.from_csr(csr.indptr, csr.indices, (N_Q, N_K)),
        "Mask.from_scipy": ioattn.Mask.from_scipy(csr.tocoo()),
        "Mask.from_mtx": ioattn.Mask.from_mtx(str(path)),
        "spec file:": f"file:{path}",
        "boolean array": allowed,
        "scipy.sparse": csr,
        "scipy csc, duplicates": scipy.sparse.csc_matrix(
            (np.ones(2 * rows.size), (np.tile(rows, 2), np.tile(cols, 2))), shape=allowed.shape),
    }


def test_masks_from_every_source(dtype, tmp_path):
    allowed, masks = sources(tmp_path)
    q, k, v = qkv(n_q=N_Q, n_k=N_K, dtype=dtype, seed=4)
    want, want_lse, _ = reference(q, k, v, allowed)
    assert np.all(want[:, :, [0, 5]] == 0) and np.all(np.isneginf(want_lse[:, :, [0, 5]]))
    first = None
    for name, mask in masks.items():
        if isinstance(mask, ioattn.Mask):
            assert mask.nnz == allowed.sum() and mask.empty_rows == 2, name
            assert np.array_equal(dense_of(mask), allowed), name
        out, lse = ioattn.attention(q, k, v, mask=mask, return_lse=True)
        assert_close(out, want, dtype, name)
        assert_close(lse, want_lse, dtype, name)
        assert np.all(out[:, :, [0, 5]] == 0) and np.all(np.isneginf(lse[:, :, [0, 5]]))
        if first is not None:
            assert np.array_equal(out, first), name  # one structure, one result
        first = out


def test_mask_api():
    m = ioattn.Mask("window:1", (4, 5))
    assert m.shape == (4, 5) and m.nnz == 11  # i' = i + 1: rows see 3, 3, 3, 2 keys
    assert np.array_equal(m.indptr, [0, 3, 6, 9, 11])
    assert np.array_equal(m.indices[:2], [0, 1])
    s = m.to_scipy()
    assert scipy.sparse.isspmatrix_csr(s) and s.dtype == bool and s.shape == (4, 5)
    assert ioattn.Mask.from_scipy(s) == m
    assert "nnz=11" in repr(m)


def test_causal_with_a_mask_is_the_intersection(dtype):
    q, k, v = qkv(n_q=N_Q, n_k=N_K, dtype=dtype, seed=6)
    allowed = allowed_of("window:4", N_Q, N_K) & allowed_of("causal", N_Q, N_K)
    out = ioattn.attention(q, k, v, mask="window:4", causal=True)
    assert_close(out, reference(q, k, v, allowed)[0], dtype)
    assert np.array_equal(out, ioattn.attention(q, k, v, mask="window:4&causal"))


def test_a_mask_is_reusable_across_calls_and_dtypes():
    m = ioattn.Mask("window:2", (N_Q, N_K))
    for dt in (np.float32, np.float64):
        q, k, v = qkv(n_q=N_Q, n_k=N_K, dtype=dt, seed=8)
        a = ioattn.attention(q, k, v, mask=m)
        assert np.array_equal(a, ioattn.attention(q, k, v, mask=m))
