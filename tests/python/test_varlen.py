"""Packed variable-length batches: ioattn.Mask.varlen(cu_seqlens, causal, window) against its
definition and the spec strings, attention over the packed batch against each sequence run
alone (dense, causal, windowed), the errors, and the torch drop-ins' cu_seqlens."""

import numpy as np
import pytest
import torch

import ioattn
import ioattn.torch
from conftest import assert_close, qkv, reference

CU = [0, 5, 5, 17, 18, 30]  # lengths 5, 0, 12, 1, 12: an empty and a one-token sequence


def allowed_varlen(cu, causal, window):
    n = cu[-1]
    seq = np.searchsorted(cu, np.arange(n), side="right")
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    ok = seq[:, None] == seq[None, :]
    if causal:
        ok &= j <= i
    if window is not None:
        ok &= np.abs(i - j) <= window
    return ok


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [None, 0, 3])
def test_varlen_mask_and_spec(causal, window):
    m = ioattn.Mask.varlen(CU, causal=causal, window=window)
    assert m.shape == (30, 30)
    assert np.array_equal(m.to_scipy().toarray(), allowed_varlen(CU, causal, window))
    lengths = ",".join(str(b - a) for a, b in zip(CU, CU[1:]))
    name = ("causal-" if causal else "") + ("window-varlen:%d:" % window if window is not None
                                            else "varlen:")
    assert ioattn.Mask(name + lengths, (30, 30)) == m
    assert ioattn.Mask.varlen(np.array(CU), causal=causal, window=window) == m


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [None, 4])
def test_varlen_attention_per_sequence(dtype, causal, window):
    q, k, v = qkv(b=1, h=2, g=2, n_q=30, n_k=30, d=8, dtype=dtype, seed=4)
    out, lse = ioattn.attention(q, k, v, mask=ioattn.Mask.varlen(CU, causal=causal,
                                                                 window=window),
                                return_lse=True)
    for a, b in zip(CU, CU[1:]):
        if a == b:
            continue
        qs, ks, vs = q[:, :, a:b], k[:, :, a:b], v[:, :, a:b]
        if window is None:
            alone, alone_lse = ioattn.attention(qs, ks, vs, causal=causal, return_lse=True)
        else:
            spec = ("causal-window:%d" if causal else "window:%d") % window
            alone, alone_lse = ioattn.attention(qs, ks, vs, mask=spec, return_lse=True)
        assert_close(out[:, :, a:b], alone, dtype, f"sequence {a}:{b}")
        assert_close(lse[:, :, a:b], alone_lse, dtype, f"sequence {a}:{b} lse")
    want, _, _ = reference(q, k, v, allowed_varlen(CU, causal, window))
    assert_close(out, want, dtype, "packed against the reference")


def test_varlen_errors():
    with pytest.raises(ValueError, match="start at 0"):
        ioattn.Mask.varlen([1, 4])
    with pytest.raises(ValueError, match="start at 0"):
        ioattn.Mask.varlen([0])
    with pytest.raises(ValueError, match=r"cu_seqlens\[2\] = 3 < cu_seqlens\[1\] = 4"):
        ioattn.Mask.varlen([0, 4, 3])
    with pytest.raises(ValueError, match="window = -1"):
        ioattn.Mask.varlen([0, 4], window=-1)
    with pytest.raises(ValueError, match="sum to 7"):
        ioattn.Mask("varlen:3,4", (8, 8))


@pytest.mark.parametrize("causal", [False, True])
def test_torch_cu_seqlens(causal):
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.rand(1, 2, 30, 4, generator=g, dtype=torch.float64) for _ in range(3))
    cu = torch.tensor(CU, dtype=torch.int32)
    got = ioattn.torch.scaled_dot_product_attention(q, k, v, is_causal=causal, cu_seqlens=cu)
    also = ioattn.torch.attention(q, k, v, causal=causal, cu_seqlens=CU)
    want = ioattn.attention(q.numpy(), k.numpy(), v.numpy(),
                            mask=ioattn.Mask.varlen(CU, causal=causal))
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(also.detach().numpy(), want)
    with pytest.raises(ValueError, match="not both"):
        ioattn.torch.attention(q, k, v, mask="dense", cu_seqlens=CU)
