"""ioattn.torch: torch.autograd.gradcheck in float64 through ioattn.torch.attention (dense,
causal with n_q > n_k, GQA, sparse masks with an empty row), a training step with a sparse
mask that changes the parameters as torch's own masked attention would, and the SDPA drop-in
against SDPA's definition (boolean and 0/-inf masks, top-left is_causal, 3-D inputs, scale)
with its documented errors."""

import math

import numpy as np
import pytest
import torch

import ioattn
import ioattn.torch


def tensors(shapes, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(s, generator=g, dtype=dtype).mul_(2).sub_(1).requires_grad_()
            for s in shapes]


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_dense(causal):
    q, k, v = tensors([(2, 4, 7, 3), (2, 2, 5, 3), (2, 2, 5, 4)])  # GQA, n_q > n_k
    f = lambda q, k, v: ioattn.torch.attention(q, k, v, causal=causal)  # noqa: E731
    assert torch.autograd.gradcheck(f, (q, k, v), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("mask", ["window:1+global:1", "bool-with-empty-row"])
@pytest.mark.parametrize("schedule", ["fused", "materialized"])
def test_gradcheck_sparse(mask, schedule):
    q, k, v = tensors([(1, 2, 6, 3), (1, 1, 8, 3), (1, 1, 8, 2)], seed=1)
    if mask != "window:1+global:1":
        mask = torch.rand(6, 8, generator=torch.Generator().manual_seed(2)) < 0.5
        mask[3] = False
    f = lambda q, k, v: ioattn.torch.attention(q, k, v, mask=mask, schedule=schedule)  # noqa
    assert torch.autograd.gradcheck(f, (q, k, v), eps=1e-6, atol=1e-7)


def native_attention(q, k, v, allowed):
    """torch's own masked attention: masked_fill, softmax, matmul (autograd)."""
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1) @ v


def test_training_step_with_a_sparse_mask():
    # --- README: a training step with a sparse mask ---
    import torch
    import ioattn.torch

    torch.manual_seed(0)
    B, H, N, d = 1, 4, 256, 32
    x = torch.randn(B, N, H * d)
    proj = torch.nn.Linear(H * d, 3 * H * d)
    opt = torch.optim.SGD(proj.parameters(), lr=0.1)
    mask = ioattn.Mask("window:16+global:2", (N, N))  # built once, reused every step

    q, k, v = proj(x).view(B, N, 3, H, d).permute(2, 0, 3, 1, 4)  # each [B, H, N, d]
    out = ioattn.torch.attention(q, k, v, mask=mask)
    loss = out.square().mean()
    loss.backward()
    opt.step()
    # --- end of the README example ---

    # the same seed rebuilds the inputs and the weights before the step: torch's own masked
    # attention gives the same output and gradients, and the step moved the weights by them
    torch.manual_seed(0)
    x0 = torch.randn(B, N, H * d)
    proj0 = torch.nn.Linear(H * d, 3 * H * d)
    assert torch.equal(x0, x)
    q0, k0, v0 = proj0(x0).view(B, N, 3, H, d).permute(2, 0, 3, 1, 4)
    native = native_attention(q0, k0, v0, torch.from_numpy(mask.to_scipy().toarray()))
    torch.testing.assert_close(out, native, rtol=1e-5, atol=1e-6)
    native.square().mean().backward()
    assert proj0.weight.grad.abs().max() > 0
    torch.testing.assert_close(proj.weight.grad, proj0.weight.grad, rtol=1e-4, atol=1e-8)
    assert not torch.equal(proj.weight, proj0.weight)
    with torch.no_grad():
        torch.testing.assert_close(proj.weight, proj0.weight - 0.1 * proj0.weight.grad)


def sdpa_definition(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """SDPA as torch 2 documents it: scale * Q K^T, a top-left causal mask or attn_mask
    (boolean: True = attend; float: added), softmax, times V."""
    L, S = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        s = s.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        s = s + attn_mask
    return torch.softmax(s, dim=-1) @ v


def sdpa_cases():
    g = torch.Generator().manual_seed(3)
    band = (torch.arange(9)[:, None] - torch.arange(11)[None, :]).abs() <= 3
    bias = torch.zeros(1, 1, 9, 11).masked_fill(~band, float("-inf"))
    return [
        ("no mask", (2, 3, 9, 4), (2, 3, 11, 4), (2, 3, 11, 5), {}),
        ("causal square", (1, 2, 8, 4), (1, 2, 8, 4), (1, 2, 8, 4), {"is_causal": True}),
        ("causal L < S", (1, 2, 6, 4), (1, 2, 10, 4), (1, 2, 10, 4), {"is_causal": True}),
        ("causal L > S", (1, 2, 10, 4), (1, 2, 6, 4), (1, 2, 6, 4), {"is_causal": True}),
        ("bool mask", (2, 2, 9, 4), (2, 2, 11, 4), (2, 2, 11, 4), {"attn_mask": band}),
        ("float mask", (2, 2, 9, 4), (2, 2, 11, 4), (2, 2, 11, 4), {"attn_mask": bias}),
        ("3-D", (3, 9, 4), (3, 11, 4), (3, 11, 2), {"scale": 0.3}),
        ("random bool", (1, 1, 9, 4), (1, 1, 11, 4), (1, 1, 11, 4),
         {"attn_mask": (torch.rand(9, 11, generator=g) < 0.6) | band}),
    ]


@pytest.mark.parametrize("case", range(len(sdpa_cases())))
def test_sdpa_drop_in(case):
    name, sq, sk, sv, kw = sdpa_cases()[case]
    q, k, v = tensors([sq, sk, sv], seed=case)
    got = ioattn.torch.scaled_dot_product_attention(q, k, v, **kw)
    want = sdpa_definition(q, k, v, **kw)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12, msg=name)
    g = torch.rand(want.shape, dtype=torch.float64)
    grads = torch.autograd.grad(got, (q, k, v), g)
    want_grads = torch.autograd.grad(want, (q, k, v), g)
    for a, b in zip(grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)


def test_sdpa_fully_masked_row_is_zero_not_nan():
    q, k, v = tensors([(1, 1, 4, 2), (1, 1, 4, 2), (1, 1, 4, 2)])
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[2] = False
    out = ioattn.torch.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.all(out[0, 0, 2] == 0) and torch.isfinite(out).all()


def test_sdpa_errors():
    q, k, v = tensors([(1, 2, 4, 2)] * 3)
    sdpa = ioattn.torch.scaled_dot_product_attention
    square = torch.ones(4, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match="both set"):
        sdpa(q, k, v, attn_mask=square, is_causal=True)
    with pytest.raises(ValueError, match="dropout"):
        sdpa(q, k, v, dropout_p=0.1)
    with pytest.raises(ValueError, match="leading sizes must be 1"):
        sdpa(q, k, v, attn_mask=torch.ones(2, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="only 0"):
        sdpa(q, k, v, attn_mask=torch.full((4, 4), 0.5, dtype=torch.float64))


def test_dtypes_are_never_cast():
    q, k, v = tensors([(1, 1, 4, 2)] * 3, dtype=torch.float32)
    out = ioattn.torch.attention(q, k, v)
    assert out.dtype == torch.float32
    with pytest.raises(TypeError):
        ioattn.torch.attention(q.half(), k.half(), v.half())
    with pytest.raises(TypeError):
        ioattn.torch.attention(q, k.double(), v)


def test_outputs_share_memory_with_numpy():
    q, k, v = tensors([(1, 2, 5, 3)] * 3)
    out = ioattn.torch.attention(q, k, v)
    view = out.detach().numpy()
    view[0, 0, 0, 0] = 42.0  # torch.from_numpy: one buffer
    assert out[0, 0, 0, 0].item() == 42.0
    assert np.array_equal(view, out.detach().numpy())
