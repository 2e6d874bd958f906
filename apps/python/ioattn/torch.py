"""ioattn for PyTorch CPU tensors: an autograd Function with ioattn's forward and backward
kernels, ``attention`` in front of it, and ``scaled_dot_product_attention``, a drop-in with
the semantics of torch.nn.functional.scaled_dot_product_attention (which torch 1.13 lacks).

Tensors reach the kernels without copies (``.detach().numpy()`` and ``torch.from_numpy``;
torch.bfloat16 tensors as int16 views of their bits, since numpy has no bfloat16); the
backward reads the q, k, v, out and lse saved by the forward (``save_for_backward``), as
torch 1.13's ``forward(ctx, ...)`` Functions do. bfloat16 tensors compute in fp32 with
bfloat16 outputs and gradients and a float32 lse (docs/python.md).
"""

import functools

import numpy as _np
import torch as _torch
from torch.autograd.function import once_differentiable as _once_differentiable

import ioattn as _ioattn
from ioattn import _core

__all__ = ["AttentionFunction", "attention", "scaled_dot_product_attention"]


def _numpy(t, name):
    if not isinstance(t, _torch.Tensor):
        raise TypeError(f"ioattn.torch: {name} must be a torch.Tensor (got {type(t).__name__})")
    if t.device.type != "cpu":
        raise ValueError(f"ioattn.torch: {name} is on {t.device}; ioattn runs on CPU tensors")
    t = t.detach().resolve_conj().resolve_neg()
    if t.dtype == _torch.bfloat16:  # the bits, in place: numpy has no bfloat16
        return t.view(_torch.int16).numpy()
    return t.numpy()


def _tensor(a, bf16):
    """The tensor over a result array (bf16: the int16 bits viewed as torch.bfloat16)."""
    t = _torch.from_numpy(a)
    return t.view(_torch.bfloat16) if bf16 else t


def _is_bf16(*tensors):
    return any(isinstance(t, _torch.Tensor) and t.dtype == _torch.bfloat16 for t in tensors)


class AttentionFunction(_torch.autograd.Function):
    """out = attention(q, k, v) with gradients for q, k and v. Arguments after v:
    mask (an ioattn.Mask or None), causal (bottom-right, for mask None), scale (None:
    1/sqrt(d)), schedule, num_threads."""

    @staticmethod
    def forward(ctx, q, k, v, mask, causal, scale, schedule, num_threads):
        bf16 = _is_bf16(q, k, v)
        out, lse = _core.attention(_numpy(q, "q"), _numpy(k, "k"), _numpy(v, "v"), mask, causal,
                                   scale, schedule, "cost", None, None, True, num_threads, "auto",
                                   bf16)
        out, lse = _tensor(out, bf16), _torch.from_numpy(lse)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.options = (mask, causal, scale, schedule, num_threads)
        return out

    @staticmethod
    @_once_differentiable
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        mask, causal, scale, schedule, num_threads = ctx.options
        bf16 = _is_bf16(q, k, v)
        grads = _core.attention_backward(
            _numpy(dout, "grad_output"), _numpy(q, "q"), _numpy(k, "k"), _numpy(v, "v"),
            _numpy(out, "out"), _numpy(lse, "lse"), mask, causal, scale, schedule, "cost", None,
            None, num_threads, "auto", bf16)
        dq, dk, dv = (_tensor(g, bf16) for g in grads)
        return dq, dk, dv, None, None, None, None, None


def _as_numpy_mask(mask):
    if isinstance(mask, _torch.Tensor):
        return _numpy(mask, "mask")
    return mask


def _varlen_mask(cu_seqlens, causal, attn_mask, where):
    """The Mask of packed sequences at offsets cu_seqlens (a tensor, array or list)."""
    if attn_mask is not None:
        raise ValueError(f"{where}: give a mask or cu_seqlens, not both")
    if isinstance(cu_seqlens, _torch.Tensor):
        cu_seqlens = cu_seqlens.detach().cpu().tolist()
    return _ioattn.Mask.varlen([int(x) for x in cu_seqlens], causal=bool(causal))


def attention(q, k, v, mask=None, causal=False, scale=None, schedule="auto", num_threads=None,
              cu_seqlens=None):
    """ioattn.attention on tensors [B, H, N, d], differentiable in q, k and v. mask: as
    ioattn.attention (a spec string, an ioattn.Mask, a scipy.sparse matrix, a boolean array
    or boolean tensor, True = attend), resolved once per call; causal is ioattn's
    bottom-right alignment. cu_seqlens (instead of mask): packed sequences at these offsets,
    each attending within itself (causal within each with causal=True), as
    ioattn.Mask.varlen. Returns out [B, H, n_q, d_v]."""
    m, c = None, causal
    if cu_seqlens is not None:
        mask = _varlen_mask(cu_seqlens, causal, mask, "ioattn.torch.attention")
        causal = False
    if mask is not None:
        if q.dim() != 4 or k.dim() != 4:
            raise ValueError(f"ioattn.torch.attention: q and k must be 4-D [B, H, N, d] (got "
                             f"{q.dim()}-D and {k.dim()}-D)")
        m, c, _ = _ioattn._resolve(_as_numpy_mask(mask), causal, q.shape[2], k.shape[2],
                                   "ioattn.torch.attention")
    return AttentionFunction.apply(q, k, v, m, c, scale, schedule, num_threads)


@functools.lru_cache(maxsize=16)
def _top_left_causal(n_q, n_k):
    """SDPA's is_causal for n_q != n_k: query i sees keys 0..i (top-left aligned)."""
    counts = _np.minimum(_np.arange(1, n_q + 1), n_k)
    indptr = _np.concatenate(([0], _np.cumsum(counts)))
    indices = _np.arange(indptr[-1]) - _np.repeat(indptr[:-1], counts)
    return _ioattn.Mask.from_csr(indptr, indices, (n_q, n_k))


def _shared_mask(attn_mask, n_q, n_k):
    """SDPA's attn_mask as one (n_q, n_k) ioattn.Mask: boolean True = attend, or a float mask
    added to the scores whose entries are 0 (attend) or -inf (masked)."""
    where = "ioattn.torch.scaled_dot_product_attention"
    m = attn_mask
    if m.dim() < 2 or any(s != 1 for s in m.shape[:-2]):
        raise ValueError(f"{where}: attn_mask of shape {tuple(m.shape)}: ioattn shares one "
                         f"(L, S) mask across batches and heads (leading sizes must be 1)")
    m = m.reshape(m.shape[-2], m.shape[-1]).expand(n_q, n_k)
    if m.dtype != _torch.bool:
        if not m.is_floating_point():
            raise TypeError(f"{where}: attn_mask must be boolean or floating (got {m.dtype})")
        masked = _torch.isneginf(m)
        if not bool(((m == 0) | masked).all()):
            raise ValueError(f"{where}: a float attn_mask must hold only 0 (attend) and -inf "
                             f"(masked); ioattn computes exact sparse attention, not biases")
        m = ~masked
    return _ioattn.Mask.from_dense(_numpy(m.contiguous(), "attn_mask"))


def _as_4d(t, name):
    if t.dim() < 2:
        raise ValueError(f"ioattn.torch.scaled_dot_product_attention: {name} must have at least "
                         f"2 dimensions (..., L, E)")
    if t.dim() == 4:
        return t
    if t.dim() < 4:
        return t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
    return t.reshape((-1,) + tuple(t.shape[-3:]))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, cu_seqlens=None):
    """torch.nn.functional.scaled_dot_product_attention's semantics on CPU tensors
    (..., L, E), (..., S, E), (..., S, Ev) -> (..., L, Ev): attn_mask boolean (True = attend)
    or float 0 / -inf, one mask for every batch and head; is_causal top-left aligned (query i
    sees keys j <= i) as SDPA; an error when both are set, as SDPA; enable_gqa (torch 2.5):
    key and value may have fewer heads than query, a divisor of them (grouped-query
    attention), else their head counts must be equal. float32, float64 and bfloat16 tensors
    (bfloat16: fp32 arithmetic, bfloat16 output). Differences: dropout is not supported
    (dropout_p must be 0); a fully masked row gives 0, where SDPA gives NaN. Extension: cu_seqlens (instead of
    attn_mask) packs variable-length sequences along L = S, sequence s at positions
    cu_seqlens[s]:cu_seqlens[s+1], each attending within itself (causal within each with
    is_causal), as FlashAttention's varlen functions."""
    where = "ioattn.torch.scaled_dot_product_attention"
    if dropout_p != 0.0:
        raise ValueError(f"{where}: dropout_p = {dropout_p}: ioattn has no dropout")
    if attn_mask is not None and is_causal:
        raise ValueError(f"{where}: attn_mask and is_causal are both set")
    q, k, v = _as_4d(query, "query"), _as_4d(key, "key"), _as_4d(value, "value")
    if not enable_gqa and (k.shape[1] != q.shape[1] or v.shape[1] != q.shape[1]):
        raise ValueError(f"{where}: query has {q.shape[1]} heads, key {k.shape[1]} and value "
                         f"{v.shape[1]}: pass enable_gqa=True for grouped-query attention")
    n_q, n_k = q.shape[2], k.shape[2]
    mask, causal = None, False
    if cu_seqlens is not None:
        mask = _varlen_mask(cu_seqlens, is_causal, attn_mask, where)
    elif attn_mask is not None:
        mask = _shared_mask(attn_mask, n_q, n_k)
    elif is_causal and n_q == n_k:
        causal = True  # both alignments agree on a square problem: the dense causal kernels
    elif is_causal:
        mask = _top_left_causal(n_q, n_k)
    out = AttentionFunction.apply(q, k, v, mask, causal, scale, "auto", None)
    return out.reshape(tuple(query.shape[:-1]) + (value.shape[-1],))
