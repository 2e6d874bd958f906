"""ioattn.attention against the numpy float64 reference of conftest.py: dense, causal in both
alignments (n_q < n_k and n_q > n_k, whose first rows see nothing: out 0, lse -inf), GQA,
d_v != d, every schedule, float32 and float64, explicit scale, and strided inputs (views taken
in place where the kernels can read them, copies otherwise)."""

import numpy as np
import pytest

import ioattn
from ioattn import _core
from conftest import allowed_of, assert_close, qkv, reference

SCHEDULES = ["auto", "fused", "materialized", "reference"]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_dense_gqa(dtype, schedule):
    q, k, v = qkv(b=2, h=4, g=2, n_q=13, n_k=17, d=8, d_v=5, dtype=dtype)
    out, lse = ioattn.attention(q, k, v, schedule=schedule, M=900, return_lse=True)
    assert out.dtype == dtype and lse.dtype == dtype
    assert out.shape == (2, 4, 13, 5) and lse.shape == (2, 4, 13)
    want, want_lse, _ = reference(q, k, v)
    assert_close(out, want, dtype, "out")
    assert_close(lse, want_lse, dtype, "lse")


@pytest.mark.parametrize("n_q,n_k", [(9, 14), (14, 9), (11, 11)])
@pytest.mark.parametrize("schedule", ["fused", "materialized"])
def test_causal_is_bottom_right(dtype, n_q, n_k, schedule):
    q, k, v = qkv(b=1, h=2, g=1, n_q=n_q, n_k=n_k, d=6, dtype=dtype, seed=3)
    out, lse = ioattn.attention(q, k, v, causal=True, schedule=schedule, M=700, return_lse=True)
    allowed = allowed_of("causal", n_q, n_k)  # j <= i + n_k - n_q
    want, want_lse, _ = reference(q, k, v, allowed)
    assert_close(out, want, dtype, "out")
    assert_close(lse, want_lse, dtype, "lse")
    hidden = n_q - n_k  # rows that see no key when n_q > n_k
    if hidden > 0:
        assert np.all(out[:, :, :hidden] == 0)
        assert np.all(np.isneginf(lse[:, :, :hidden]))
        assert np.all(np.isfinite(lse[:, :, hidden:]))
    # top-left alignment would differ whenever n_q != n_k
    if n_q != n_k:
        top_left = np.tril(np.ones((n_q, n_k), bool))
        assert not np.allclose(out, reference(q, k, v, top_left)[0])


def test_scale(dtype):
    q, k, v = qkv(b=1, h=1, g=1, n_q=7, n_k=7, d=4, dtype=dtype, seed=5)
    out = ioattn.attention(q, k, v, scale=0.9)
    assert_close(out, reference(q, k, v, scale=0.9)[0], dtype)
    assert not np.allclose(out, ioattn.attention(q, k, v))


def test_float32_error_is_that_of_float32_arithmetic():
    q, k, v = qkv(b=1, h=2, g=2, n_q=64, n_k=64, d=16, dtype=np.float32, seed=7)
    want = reference(q, k, v)[0]
    err = np.max(np.abs(ioattn.attention(q, k, v) - want))
    assert 0 < err < 1e-5  # float32 rounding, not float64 computed and cast


def test_num_threads_and_schedules_agree(dtype):
    q, k, v = qkv(b=2, h=2, g=2, n_q=40, n_k=33, d=8, dtype=dtype, seed=9)
    base = ioattn.attention(q, k, v, schedule="fused", M=2000)
    for threads in (1, 2, 3):
        again = ioattn.attention(q, k, v, schedule="fused", M=2000, num_threads=threads)
        assert np.array_equal(again, base)  # bitwise, whatever the thread count


def strided_cases(dtype):
    """The packed q, k, v (v's two batches equal) and (name, which operand, an equal array in
    another layout, whether the kernels read that layout in place)."""
    q, k, v = qkv(b=2, h=2, g=2, n_q=10, n_k=12, d=6, dtype=dtype, seed=11)
    v = np.ascontiguousarray(np.broadcast_to(v[:1], v.shape))
    wide = np.zeros((2, 2, 20, 9), dtype)
    wide[:, :, ::2, :6] = q
    return (q, k, v), [
        ("every other row, padded", 0, wide[:, :, ::2, :6], True),
        ("fortran order", 0, np.asfortranarray(q), False),  # last axis not unit-stride
        ("negative row stride", 0, q[:, :, ::-1].copy()[:, :, ::-1], False),
        ("heads inside rows", 1,
         np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3), True),
        ("batch stride 0", 2, np.broadcast_to(v[:1], v.shape), True),
        ("transposed d", 0, np.ascontiguousarray(q.swapaxes(2, 3)).swapaxes(2, 3), False),
    ]


@pytest.mark.parametrize("case", range(6))
def test_strided_inputs(dtype, case):
    base, cases = strided_cases(dtype)
    name, which, view, in_place = cases[case]
    assert np.array_equal(view, base[which]), name
    assert _core._in_place(view) == in_place, name
    args = list(base)
    args[which] = view
    want, want_lse, _ = reference(*args)
    out, lse = ioattn.attention(*args, return_lse=True)
    assert_close(out, want, dtype, name)
    assert_close(lse, want_lse, dtype, name)
    assert np.array_equal(out, ioattn.attention(*base))  # the same kernels on the same values


def test_outputs_are_new_arrays():
    q, k, v = qkv(dtype=np.float32)
    a = ioattn.attention(q, k, v)
    b = ioattn.attention(q, k, v)
    assert a.flags.c_contiguous and a.flags.writeable
    assert not np.shares_memory(a, b) and not np.shares_memory(a, q)


def test_readme_numpy_example():
    # --- README: numpy ---
    import numpy as np
    import ioattn

    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 8, 512, 64), dtype=np.float32)  # [B, H, N, d]
    k = rng.standard_normal((1, 2, 512, 64), dtype=np.float32)  # 2 key/value heads: GQA
    v = rng.standard_normal((1, 2, 512, 64), dtype=np.float32)

    mask = "window:64+global:4"  # or an ioattn.Mask, a scipy.sparse matrix, a bool array
    out, lse = ioattn.attention(q, k, v, mask=mask, return_lse=True)
    dq, dk, dv = ioattn.attention_backward(np.ones_like(out), q, k, v, out, lse, mask=mask)

    io = ioattn.io_count(n=512, d=64, heads=8, kv_heads=2, mask=mask, M=1 << 16)
    print(io["schedule"], io["io"]["total"], io["bound"]["asymptotic"])
    # --- end of the README example ---

    allowed = ioattn.Mask(mask, (512, 512)).to_scipy().toarray()
    want, want_lse, _ = reference(q, k, v, allowed)
    assert_close(out, want, np.float32, "out")
    assert_close(lse, want_lse, np.float32, "lse")
    assert dk.shape == k.shape and np.all(np.isfinite(dq))
    assert io["io"]["matches_closed_form"] and io["io"]["total"] >= io["bound"]["compulsory"]
