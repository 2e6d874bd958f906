"""ioattn.decode: every sequence against ioattn.attention (causal, bottom-right aligned) over its
cached rows and against the numpy float64 reference of conftest, on numpy float32 and float64
(and float16 caches) and torch tensors (float32, a bfloat16 and a float16 cache); contiguous
and paged caches bitwise equal; GQA, n_new 1 and 16, ragged lengths with 0 and the capacity;
windows, pattern specs and patterns beyond windows; the thread count; the errors."""

import numpy as np
import pytest
import torch

import ioattn
from conftest import make, reference


def case(b=3, h=8, g=2, n_new=1, d=16, d_v=None, cap=70, lens=None, dtype=np.float32, seed=0):
    d_v = d if d_v is None else d_v
    lens = [0, n_new, cap][:b] if lens is None else lens
    q = make((b, h, n_new, d), dtype, seed)
    k = make((b, g, cap, d), dtype, seed + 1)
    v = make((b, g, cap, d_v), dtype, seed + 2)
    return q, k, v, np.array(lens, np.int64)


def expected(q, k, v, lens, window=0, globals_=0):
    """Per sequence: numpy float64 reference over its rows, token t sees j <= len - n_new + t
    (and j > that - window with a window, or j < globals_)."""
    b, h, n_new, _ = q.shape
    out = np.zeros((b, h, n_new, v.shape[-1]))
    lse = np.full((b, h, n_new), -np.inf)
    for s, n in enumerate(lens):
        if n == 0:
            continue
        p = n - n_new + np.arange(n_new)[:, None]
        j = np.arange(n)[None, :]
        allowed = (j <= p) & (((j > p - window) | (j < globals_)) if window else True)
        out[s], lse[s], _ = reference(q[s:s + 1], k[s:s + 1, :, :n], v[s:s + 1, :, :n], allowed)
    return out, lse


def paged(k, v, lens, bs, seed=1):
    """The cache laid out in blocks of bs rows at shuffled physical indices, and its table."""
    b, g, cap, _ = k.shape
    need = [(n + bs - 1) // bs for n in lens]
    perm = np.random.default_rng(seed).permutation(sum(need) + 1)
    max_blocks = (cap + bs - 1) // bs
    table = np.full((b, max_blocks), -1, np.int64)
    pk = np.full((len(perm), g, bs, k.shape[-1]), np.nan, k.dtype)
    pv = np.full((len(perm), g, bs, v.shape[-1]), np.nan, v.dtype)
    nxt = 0
    for s in range(b):
        for j in range(need[s]):
            blk = perm[nxt]
            nxt += 1
            table[s, j] = blk
            rows = min(bs, lens[s] - j * bs)
            pk[blk, :, :rows] = k[s, :, j * bs:j * bs + rows]
            pv[blk, :, :rows] = v[s, :, j * bs:j * bs + rows]
    return pk, pv, table


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("n_new", [1, 16])
def test_numpy_contiguous_and_paged(dtype, tol, n_new):
    q, k, v, lens = case(b=4, n_new=n_new, d=12, d_v=9, cap=600,
                         lens=[600, 0, n_new, 513], dtype=dtype)
    out, lse = ioattn.decode(q, k, v, lens, return_lse=True)
    assert out.dtype == dtype and out.shape == (4, 8, n_new, 9) and lse.shape == (4, 8, n_new)
    want_out, want_lse = expected(q, k, v, lens)
    assert np.abs(out - want_out).max() <= tol
    assert np.array_equal(np.isinf(lse), np.isinf(want_lse))
    assert (lse[1] == -np.inf).all() and (out[1] == 0).all()
    finite = np.isfinite(want_lse)
    assert np.abs(lse[finite] - want_lse[finite]).max() <= tol
    for bs in (16, 5):
        pk, pv, table = paged(k, v, list(lens), bs)
        assert np.array_equal(ioattn.decode(q, pk, pv, lens, block_table=table), out)


def test_matches_attention_entry_point_per_sequence():
    q, k, v, lens = case(b=3, h=4, g=1, n_new=3, cap=90, lens=[90, 3, 47])
    out = ioattn.decode(q, k, v, lens)
    for s, n in enumerate(lens):
        o = ioattn.attention(q[s:s + 1], k[s:s + 1, :, :n], v[s:s + 1, :, :n], causal=True)
        assert np.abs(out[s:s + 1] - o).max() <= 2e-6


@pytest.mark.parametrize("window", [1, 5, 40, 1000])
def test_window_and_mask_spec(window):
    q, k, v, lens = case(b=3, n_new=4, cap=300, lens=[300, 4, 61])
    out = ioattn.decode(q, k, v, lens, window=window)
    assert np.abs(out - expected(q, k, v, lens, window)[0]).max() <= 2e-5
    spec = ioattn.decode(q, k, v, lens, mask=f"causal-window:{window - 1}")
    assert np.array_equal(spec, out)
    # the attention entry point with the same mask, sequence 0
    o = ioattn.attention(q[:1], k[:1], v[:1], mask=f"causal-window:{window - 1}")
    assert np.abs(out[:1] - o).max() <= 2e-5
    # rows before the window are never read
    if window < 100:
        k2, v2 = k.copy(), v.copy()
        k2[0, :, :300 - 4 - window + 1] = np.nan
        v2[0, :, :300 - 4 - window + 1] = np.nan
        assert np.array_equal(ioattn.decode(q, k2, v2, lens, window=window), out)


@pytest.mark.parametrize("paged_cache", [False, True])
def test_pattern_beyond_windows(paged_cache):
    # StreamingLLM's cache: 4 global tokens and a window of 40; the rows between are never read
    q, k, v, lens = case(b=3, n_new=4, cap=300, lens=[300, 4, 61])
    want = expected(q, k, v, lens, window=41, globals_=4)[0]
    k2, v2 = k.copy(), v.copy()
    k2[0, :, 4:300 - 4 - 40] = np.nan
    v2[0, :, 4:300 - 4 - 40] = np.inf
    table = None
    if paged_cache:
        k2, v2, table = paged(k2, v2, lens, 16)
    out = ioattn.decode(q, k2, v2, lens, block_table=table, mask="causal-window:40+global:4")
    assert np.abs(out - want).max() <= 2e-5
    # a torch bfloat16 cache with a random pattern, against the attention entry point
    tq = torch.from_numpy(q)
    tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (k, v))
    got = ioattn.decode(tq, tk, tv, lens, mask="random:0.3", seed=5)
    o = ioattn.attention(q[:1], tk[:1].float().numpy(), tv[:1].float().numpy(),
                         mask=ioattn.Mask("random:0.3&causal", (4, 300), seed=5))
    assert np.abs(got[:1].numpy() - o).max() <= 2e-5


def test_scale_and_threads():
    q, k, v, lens = case(b=2, cap=2000, lens=[2000, 1500])
    a = ioattn.decode(q, k, v, lens, scale=0.3, num_threads=1)
    assert np.abs(a - expected(q * 0.3 * 4, k, v, lens)[0]).max() <= 2e-5  # 1/sqrt(16) = 1/4
    assert np.array_equal(ioattn.decode(q, k, v, lens, scale=0.3, num_threads=2), a)


def test_torch_float32_and_bfloat16_cache():
    q, k, v, lens = case(b=3, h=8, g=8, n_new=2, d=32, cap=200, lens=[200, 2, 77])
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    out, lse = ioattn.decode(tq, tk, tv, torch.from_numpy(lens), return_lse=True)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert np.array_equal(out.numpy(), ioattn.decode(q, k, v, lens))
    hk, hv = tk.to(torch.bfloat16), tv.to(torch.bfloat16)
    half = ioattn.decode(tq, hk, hv, lens)
    # a bf16 cache is the float32 cache of the rounded values, bitwise
    assert np.array_equal(half.numpy(), ioattn.decode(q, hk.float().numpy(), hv.float().numpy(),
                                                      lens))
    assert np.abs(half.numpy() - out.numpy()).max() < 0.05  # bf16 rounding of the cache
    # paged bf16 with a tensor block table
    pk, pv, table = paged(k, v, list(lens), 16)
    tpk = torch.from_numpy(pk).to(torch.bfloat16)
    tpv = torch.from_numpy(pv).to(torch.bfloat16)
    assert torch.equal(ioattn.decode(tq, tpk, tpv, lens, block_table=torch.from_numpy(table)),
                       half)


def test_float16_cache_numpy_and_torch():
    q, k, v, lens = case(b=3, h=8, g=2, n_new=2, d=32, cap=200, lens=[200, 2, 77])
    hk, hv = k.astype(np.float16), v.astype(np.float16)
    half = ioattn.decode(q, hk, hv, lens)
    # an fp16 cache is the float32 cache of the rounded values, bitwise
    assert np.array_equal(half, ioattn.decode(q, hk.astype(np.float32), hv.astype(np.float32),
                                              lens))
    assert np.abs(half - ioattn.decode(q, k, v, lens)).max() < 5e-3  # fp16 rounding
    tq, tk, tv = (torch.from_numpy(x) for x in (q, hk, hv))
    assert tk.dtype == torch.float16
    assert np.array_equal(ioattn.decode(tq, tk, tv, lens).numpy(), half)
    pk, pv, table = paged(hk, hv, list(lens), 16)
    assert np.array_equal(ioattn.decode(q, pk, pv, lens, block_table=table), half)
    with pytest.raises(TypeError, match="a float16 cache takes a float32 q"):
        ioattn.decode(q.astype(np.float64), hk, hv, lens)
    with pytest.raises(TypeError, match="a float16 cache takes a float32 q and both caches"):
        ioattn.decode(q, hk, v, lens)


def test_errors():
    q, k, v, lens = case()
    with pytest.raises(TypeError, match="numpy has no bfloat16"):
        ioattn.decode(q, k.view(np.uint16), v.view(np.uint16), lens)
    with pytest.raises(TypeError, match="float32 or all float64"):
        ioattn.decode(q, k.astype(np.float64), v, lens)
    with pytest.raises(TypeError, match="kv_lens must hold integers"):
        ioattn.decode(q, k, v, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"kv_lens has shape \(2,\), expected \(3,\)"):
        ioattn.decode(q, k, v, [1, 2])
    with pytest.raises(ValueError, match=r"kv_lens\[2\] = 71 is outside \[0, capacity = 70\]"):
        ioattn.decode(q, k, v, [1, 2, 71])
    with pytest.raises(ValueError, match="pattern 'glob:4' over the cached positions"):
        ioattn.decode(q, k, v, lens, mask="glob:4")
    with pytest.raises(TypeError, match="mask must be a pattern spec string"):
        ioattn.decode(q, k, v, lens, mask=3)
    with pytest.raises(ValueError, match="window = 0"):
        ioattn.decode(q, k, v, lens, window=0)
    with pytest.raises(ValueError, match="give window or mask"):
        ioattn.decode(q, k, v, lens, window=3, mask="causal")
    with pytest.raises(ValueError, match="q must be 4-D"):
        ioattn.decode(q[0], k, v, lens)
    with pytest.raises(ValueError, match="heads = 8 is not a multiple of kv_heads = 3"):
        ioattn.decode(q, np.ascontiguousarray(k[:, :1].repeat(3, 1)),
                      np.ascontiguousarray(v[:, :1].repeat(3, 1)), lens)
    with pytest.raises(ValueError, match=r"block_table\[0\]\[0\] = 99 is outside"):
        ioattn.decode(q, k, v, [5, 0, 0], block_table=np.full((3, 5), 99))
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    with pytest.raises(TypeError, match="bfloat16 cache takes a float32 q"):
        ioattn.decode(tq.double(), tk.to(torch.bfloat16), tv.to(torch.bfloat16), lens)
    with pytest.raises(TypeError, match="numpy arrays or all torch tensors"):
        ioattn.decode(q, tk, tv, lens)
