"""bfloat16 through ioattn.torch: attention, the autograd Function and the SDPA drop-in take
torch.bfloat16 tensors without copies and return bfloat16 outputs and gradients (lse
float32); the results are the float32 computation on the same bf16 inputs, rounded (and with
P rounded to bf16 where the native AVX512_BF16 kernel runs), within the derived tolerance of
docs/design.md section 16 against float64; mixed dtypes are a
TypeError, numpy arrays stay float32/float64 and say so; SDPA's enable_gqa."""

import numpy as np
import pytest
import torch

import ioattn
import ioattn.torch

U16 = 2.0 ** -8


def randn(shape, seed, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype).requires_grad_()


def reference(q, k, v, dout, mask=None):
    """out and (dq, dk, dv) in float64 on the same (bf16-valued) inputs, by autograd."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kk, vv = k64.repeat_interleave(group, 1), v64.repeat_interleave(group, 1)
    s = q64 @ kk.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, -1) @ vv
    grads = torch.autograd.grad(out, (q64, k64, v64), dout.double())
    return out.detach(), grads


def rel_frobenius(x, ref):
    return float((x.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("mask", [None, "window:16"])
def test_bf16_attention_matches_float64_within_the_derived_tolerance(mask):
    q, k, v = randn((1, 4, 256, 64), 1), randn((1, 2, 256, 64), 2), randn((1, 2, 256, 64), 3)
    out = ioattn.torch.attention(q, k, v, mask=mask)
    assert out.dtype == torch.bfloat16
    dout = randn(out.shape, 4).detach()
    out.backward(dout)
    allowed = None
    if mask is not None:
        allowed = torch.from_numpy(ioattn.Mask(mask, (256, 256)).to_scipy().toarray())
    want, grads = reference(q, k, v, dout, allowed)
    n_k, d = 256, 64
    # + u max|V|: the native bf16 kernel (AVX512_BF16) rounds P to bf16 before P V
    tol = ((U16 + 2 * (n_k + d) * 2.0 ** -24) * float(want.abs().max())
           + U16 * float(v.detach().float().abs().max()))
    assert float((out.double() - want).abs().max()) <= tol
    for t, g in zip((q, k, v), grads):
        assert t.grad.dtype == torch.bfloat16
        assert rel_frobenius(t.grad, g) <= 2.5 * U16


def test_bf16_is_the_float32_run_on_the_same_inputs_within_the_rounding_of_p_and_o():
    q, k, v = randn((2, 2, 100, 32), 5), randn((2, 2, 90, 32), 6), randn((2, 2, 90, 16), 7)
    out = ioattn.torch.attention(q, k, v, causal=True)
    out32 = ioattn.torch.attention(q.detach().float(), k.detach().float(), v.detach().float(),
                                   causal=True)
    # widened: out32 rounded to bf16; native (AVX512_BF16): P rounded to bf16 too, u max|V|
    tol = U16 * float(out32.abs().max()) + U16 * float(v.detach().float().abs().max())
    assert float((out.float() - out32).abs().max()) <= tol
    # and torch's own bf16 SDPA-by-definition agrees to bf16 rounding
    s = (q.float() @ k.float().transpose(-2, -1)) / 32 ** 0.5
    causal = torch.ones(100, 90, dtype=torch.bool).tril(diagonal=-10)
    torch_out = torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v.float()
    # rows 0-9 see no key (bottom-right alignment): ioattn gives 0, torch NaN
    assert torch.all(out[:, :, :10] == 0)
    torch.testing.assert_close(out[:, :, 10:].float(), torch_out[:, :, 10:], rtol=2 * U16,
                               atol=2 * U16)


def test_bf16_inputs_are_read_in_place_and_strided_views_work():
    base = randn((1, 8, 64, 32), 8).detach()
    q = base[:, ::2]  # every other head: strided, read without a copy
    k, v = randn((1, 4, 64, 32), 9).detach(), randn((1, 4, 64, 32), 10).detach()
    assert ioattn._core._in_place(q.view(torch.int16).numpy())
    out = ioattn.torch.attention(q, k, v)
    want = ioattn.torch.attention(q.contiguous(), k, v)
    assert torch.equal(out, want)


def test_bf16_sdpa_drop_in_and_enable_gqa():
    q, k, v = randn((2, 4, 33, 16), 11), randn((2, 2, 40, 16), 12), randn((2, 2, 40, 16), 13)
    out = ioattn.torch.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 4, 33, 16)
    out.float().sum().backward()
    assert q.grad.dtype == k.grad.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="enable_gqa"):
        ioattn.torch.scaled_dot_product_attention(q, k, v)


def test_bf16_dtypes_are_never_mixed_and_numpy_says_float32_or_float64():
    q = randn((1, 1, 8, 4), 14)
    with pytest.raises(TypeError, match="torch.bfloat16"):
        ioattn.torch.attention(q, q.float(), q)
    a = np.zeros((1, 1, 8, 4), dtype=np.int16)
    with pytest.raises(TypeError, match="float32 or all float64.*bfloat16"):
        ioattn.attention(a, a, a)
