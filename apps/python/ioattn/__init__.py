"""ioattn: exact dense and sparse attention on CPUs, forward and backward, measured in data
movement (the Python front end of the C++ library; see README.md, section Python).

Arrays are numpy ``[B, H, N, d]``: q ``[B, H, n_q, d]``, k ``[B, H_kv, n_k, d]`` and
v ``[B, H_kv, n_k, d_v]`` with H_kv dividing H (grouped-query attention); out is
``[B, H, n_q, d_v]`` and lse ``[B, H, n_q]``, the natural-log log-sum-exp of the scaled scores
(-inf for a row with no allowed key, whose output is 0). All arrays of a call are float32 or
all float64: anything else is a TypeError, never a silent cast. ``causal=True`` is
bottom-right aligned: query i sees key j iff j <= i + (n_k - n_q). Errors: ValueError
(ioattn.InvalidArgument) for bad arguments, ioattn.Error (a RuntimeError) for the rest.
``import ioattn.torch`` for the PyTorch autograd Function and the SDPA-style drop-in.
``decode`` is the decode step over a key/value cache (contiguous or paged, fp32, bf16 or fp16),
on numpy arrays and torch tensors.

Plan cache: every Mask (and every mask given as a spec string, scipy matrix or array) is kept
by content with the plans built over it, in a least-recently-used cache of 32 masks
(``IOATTN_PLAN_CACHE_SIZE`` at import, ``set_plan_cache_size(n)`` after; 0 turns it off), so
a mask given again is not built and planned again. ``plan_cache_info()`` reports hits,
misses, evictions, entries and capacity; ``clear_plan_cache()`` empties it.

Output pool: the memory of freed output arrays of 1 MiB and more is kept for the next calls'
outputs (at most 16 blocks and 1 GiB: ``IOATTN_OUTPUT_POOL_MB`` at import,
``set_output_pool_limit(bytes)`` after; 0 keeps none), so a loop's outputs land on pages
already mapped; ``output_pool_info()`` reports kept_bytes, blocks, limit, reused, allocated.
Index pool: the index arrays of 4 MiB and more of freed masks are kept the same way for the
next masks built (at most 8 arrays and 512 MiB: ``IOATTN_INDEX_POOL_MB`` before the first
mask, ``set_index_pool_limit(bytes)`` after; ``index_pool_info()``).
"""

import sys as _sys

import numpy as _np

from . import _core
from ._core import (CapacityError, Error, InvalidArgument, Mask, clear_plan_cache,
                    index_pool_info, output_pool_info, plan_cache_info, set_index_pool_limit,
                    set_output_pool_limit, set_plan_cache_size)

__all__ = [
    "attention",
    "attention_backward",
    "decode",
    "Mask",
    "io_count",
    "bound",
    "Error",
    "InvalidArgument",
    "CapacityError",
    "set_plan_cache_size",
    "plan_cache_info",
    "clear_plan_cache",
    "set_output_pool_limit",
    "output_pool_info",
    "set_index_pool_limit",
    "index_pool_info",
]
__version__ = "0.1.0"


def _is_scipy_sparse(x):
    sp = _sys.modules.get("scipy.sparse")  # a scipy matrix means scipy is imported already
    return sp is not None and sp.issparse(x)


def _mask_of(mask, n_q, n_k, where):
    """The ioattn.Mask a `mask=` argument names, of shape (n_q, n_k)."""
    if isinstance(mask, Mask):
        m = mask
    elif isinstance(mask, str):
        m = Mask(mask, (n_q, n_k))
    elif isinstance(mask, _np.ndarray):
        m = Mask.from_dense(mask)
    elif _is_scipy_sparse(mask):
        m = Mask.from_scipy(mask)
    else:
        raise TypeError(
            f"{where}: mask must be None, a spec string, an ioattn.Mask, a scipy.sparse "
            f"matrix or a boolean numpy array (got {type(mask).__name__})"
        )
    if m.shape != (n_q, n_k):
        raise ValueError(f"{where}: the mask is {m.shape[0]} x {m.shape[1]}, the call's "
                         f"n_q x n_k is {n_q} x {n_k}")
    return m


def _resolve(mask, causal, n_q, n_k, where):
    """(Mask or None, causal flag for the kernels, pattern label): a mask with causal=True
    becomes the mask intersected with the (bottom-right) causal pattern."""
    if mask is None:
        return None, bool(causal), "dense"
    m = _mask_of(mask, n_q, n_k, where)
    label = mask if isinstance(mask, str) else "mask"
    if causal:
        return m & Mask("causal", (n_q, n_k)), False, f"({label})&causal"
    return m, False, label


def _lengths(q, k):
    """(n_q, n_k) of well-formed q, k; None lets the core report what is wrong with them."""
    if all(isinstance(x, _np.ndarray) and x.ndim == 4 for x in (q, k)):
        return q.shape[2], k.shape[2]
    return None


def attention(q, k, v, *, mask=None, causal=False, scale=None, schedule="auto",
              select="cost", M=None, cache_bytes=None, return_lse=False, num_threads=None,
              variant="auto"):
    """O = softmax(scale * Q K^T restricted to the mask) V per (batch, head).

    mask: None (every pair, or the causal ones), a spec string such as
    "window:256+global:4" (resolved for this call's n_q, n_k), an ioattn.Mask, a
    scipy.sparse matrix (stored entries allowed) or a boolean array (True = attend); one
    (n_q, n_k) mask is shared by every batch and head. scale: None for 1/sqrt(d).
    schedule: "auto" (chosen by `select`: "cost" or "theory"), "fused", "materialized" or
    "reference". M: the fast memory in words (None: this machine's per-core L2).
    cache_bytes: plan for a real cache of that many bytes instead (M = cache_bytes / word
    size / 2, the slack a simulated LRU cache needs); not together with M.
    num_threads: None for every core, else at most that many workers (results are bitwise
    the same for any count). variant: for a mask under the fused schedule, "auto" (the
    variant planner's choice, reported by io_count()["variant"]) or one of "tile",
    "element", "split", "permuted" forced (the same result within the float tolerance; a
    ValueError without a mask or with another schedule; a split whose blocks' fill puts every
    pair on one side runs that side's kernel). Returns out, or (out, lse) with
    return_lse. The GIL is released while the kernels run.
    """
    m, c = None, causal
    sizes = _lengths(q, k)
    if mask is not None and sizes is not None:
        m, c, _ = _resolve(mask, causal, *sizes, "ioattn.attention")
    return _core.attention(q, k, v, m, c, scale, schedule, select, M, cache_bytes, return_lse,
                           num_threads, variant)


def attention_backward(dout, q, k, v, out, lse, *, mask=None, causal=False, scale=None,
                       schedule="auto", select="cost", M=None, cache_bytes=None,
                       num_threads=None, variant="auto"):
    """(dq, dk, dv) of attention() from its out and lse and the upstream gradient dout
    (shaped like out); the other arguments as attention(). With grouped-query heads dk and dv
    sum over the query heads that share a key/value head."""
    m, c = None, causal
    sizes = _lengths(q, k)
    if mask is not None and sizes is not None:
        m, c, _ = _resolve(mask, causal, *sizes, "ioattn.attention_backward")
    return _core.attention_backward(dout, q, k, v, out, lse, m, c, scale, schedule, select, M,
                                    cache_bytes, num_threads, variant)


def _is_tensor(x):
    torch = _sys.modules.get("torch")  # a tensor means torch is imported already
    return torch is not None and isinstance(x, torch.Tensor)


def _ints(x, name, where):
    """An integer array-like (list, numpy array or tensor) as a C-contiguous int64 array."""
    if _is_tensor(x):
        x = x.detach().cpu().numpy()
    a = _np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{where}: {name} must hold integers (got {a.dtype})")
    return _np.ascontiguousarray(a, dtype=_np.int64)


def _decode_window(window, mask, where):
    """(window, pattern) of decode's window= and mask= (a spec string, checked by the core)."""
    if mask is not None and window is not None:
        raise ValueError(f"{where}: give window or mask, not both")
    if mask is not None:
        if not isinstance(mask, str):
            raise TypeError(f"{where}: mask must be a pattern spec string such as "
                            f"'causal-window:255' or 'causal-window:1023+global:4' "
                            f"(got {type(mask).__name__})")
        return 0, mask
    if window is None:
        return 0, ""
    if isinstance(window, bool) or not isinstance(window, (int, _np.integer)) or window < 1:
        raise ValueError(f"{where}: window = {window!r} (expected an integer >= 1, or None)")
    return int(window), ""


def _decode_arrays(q, k_cache, v_cache, where):
    """(q, k, v as numpy arrays, the cache's 16-bit kind ("bf16", "fp16" or ""), whether the
    inputs were tensors): tensors without copies, a 16-bit cache as its int16 view."""
    tensors = [_is_tensor(x) for x in (q, k_cache, v_cache)]
    if any(tensors) and not all(tensors):
        raise TypeError(f"{where}: q, k_cache and v_cache must all be numpy arrays or all "
                        f"torch tensors")
    if not all(tensors):
        halves = [isinstance(x, _np.ndarray) and x.dtype == _np.float16
                  for x in (k_cache, v_cache)]
        if any(halves):
            if not all(halves) or not (isinstance(q, _np.ndarray) and q.dtype == _np.float32):
                raise TypeError(f"{where}: a float16 cache takes a float32 q and both caches "
                                f"float16 (got q {getattr(q, 'dtype', type(q).__name__)}, "
                                f"k_cache {k_cache.dtype}, v_cache {v_cache.dtype})")
            return q, k_cache.view(_np.int16), v_cache.view(_np.int16), "fp16", False
        for name, x in (("k_cache", k_cache), ("v_cache", v_cache)):
            if isinstance(x, _np.ndarray) and x.dtype not in (_np.float32, _np.float64):
                raise TypeError(f"{where}: {name} is {x.dtype}: numpy caches are float32, "
                                f"float64 or float16 (numpy has no bfloat16: pass a bf16 cache "
                                f"as a torch.bfloat16 tensor)")
        return q, k_cache, v_cache, "", False
    import torch

    def plain(t, name):
        if t.device.type != "cpu":
            raise ValueError(f"{where}: {name} is on {t.device}; ioattn runs on CPU tensors")
        return t.detach().resolve_conj().resolve_neg()

    q, k, v = plain(q, "q"), plain(k_cache, "k_cache"), plain(v_cache, "v_cache")
    for dtype, kind in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        half = [x.dtype == dtype for x in (k, v)]
        if any(half):
            if not all(half) or q.dtype != torch.float32:
                raise TypeError(f"{where}: a {dtype} cache takes a float32 q and both caches "
                                f"{dtype} (got q {q.dtype}, k_cache {k.dtype}, v_cache {v.dtype})")
            return q.numpy(), k.view(torch.int16).numpy(), v.view(torch.int16).numpy(), kind, True
    return q.numpy(), k.numpy(), v.numpy(), "", True


def decode(q, k_cache, v_cache, kv_lens, *, block_table=None, window=None, mask=None,
           seed=0, scale=None, return_lse=False, num_threads=None):
    """The decode step over a key/value cache (ioattn::decode): q [B, H, n_new, d] holds the
    n_new (1 to 16) newest tokens of each sequence, whose K and V are already the last of the
    sequence's kv_lens[b] cached rows; token t, at position p = kv_lens[b] - n_new + t, sees
    the cached positions <= p. The cache is contiguous, k_cache [B, H_kv, capacity, d] and
    v_cache [B, H_kv, capacity, d_v], or paged, [num_blocks, H_kv, block_size, d] with
    block_table [B, max_blocks] (position p of sequence b in row p % block_size of block
    block_table[b][p // block_size]). H a multiple of H_kv (GQA, MQA). numpy arrays all float32
    or all float64, or torch CPU tensors: float32 or float64, or a torch.bfloat16 or float16
    cache (numpy: float16; numpy has no bfloat16) with a float32 q, read in place and widened
    exactly. kv_lens [B] and
    block_table are integer arrays, lists or tensors. window=W: token p sees only (p - W, p],
    and the rows no token sees are never read; or mask, a pattern spec over the cached
    positions ("causal-window:W" or "window:W": W + 1 keys; "causal", "dense": all; any other
    spec of the grammar, e.g. "causal-window:1023+global:4" or "strided:64", built per sequence
    on its n_new x kv_lens[b] problem with seed, restricted to the causal rule: only the rows
    some token sees are read). scale:
    None for 1/sqrt(d). Returns out [B, H, n_new, d_v] (and lse [B, H, n_new], natural log,
    with return_lse) as numpy arrays or tensors like q; an empty sequence (kv_lens[b] = 0)
    gives out 0 and lse -inf. Bitwise the same for any num_threads; the GIL is released."""
    where = "ioattn.decode"
    w, pattern = _decode_window(window, mask, where)
    q, k, v, cache, tensors = _decode_arrays(q, k_cache, v_cache, where)
    lens = _ints(kv_lens, "kv_lens", where)
    table = None if block_table is None else _ints(block_table, "block_table", where)
    result = _core.decode(q, k, v, lens, table, w, pattern, int(seed), scale, cache,
                          bool(return_lse), num_threads)
    if not tensors:
        return result
    import torch

    if return_lse:
        return tuple(torch.from_numpy(x) for x in result)
    return torch.from_numpy(result)


def _problem(where, n, n_q, n_k, d, d_v, batch, heads, kv_heads, causal, scale):
    n_q = n if n_q is None else n_q
    n_k = n if n_k is None else n_k
    if n_q is None or n_k is None or d is None:
        raise TypeError(f"{where}: give n (or n_q and n_k) and d")
    return _core._Sizes(batch, heads, kv_heads, n_q, n_k, d, d_v, causal, scale)


def _is_double(dtype, where):
    dt = _np.dtype(dtype)
    if dt not in (_np.float32, _np.float64):
        raise TypeError(f"{where}: dtype must be float32 or float64 (got {dt})")
    return dt == _np.float64


def io_count(*, n=None, n_q=None, n_k=None, d=None, d_v=None, batch=1, heads=1, kv_heads=None,
             causal=False, scale=None, mask=None, backward=False, schedule="auto",
             select="cost", M=None, cache_bytes=None, dtype="float32", tuned=True,
             num_threads=None, variant="auto", objective="io"):
    """The I/O attention() (or attention_backward() with backward=True) would move for these
    sizes, counted by walking its schedule without data, as `ioattn run --count-io --json`
    reports it: the problem keys, "schedule", "selected_by", "M", "objective", "planned_for",
    "tiling", "bound" and "io"
    {"reads", "writes", "total", "peak_resident", "closed_form_total",
    "matches_closed_form", "ratio_to_bound"}; "z_qk" and "z_input" for a mask. M in words
    (None: the per-core L2 in words of dtype), or cache_bytes for a real cache (as in
    attention()); tuned=False takes the I/O-optimal tiling
    instead of the one tuned for this CPU; variant as in attention(), and "variant" in the
    result names the one that runs when the variant planner planned the call. objective "io"
    (the default, as `ioattn io` and `--count-io`) plans the fewest counted words among the
    plans for every grid memory M' <= M ("planned_for" is that M'; select and tuned are not
    read); "speed" counts the plan attention() runs."""
    where = "ioattn.io_count"
    sizes = _problem(where, n, n_q, n_k, d, d_v, batch, heads, kv_heads, causal, scale)
    m, c, label = _resolve(mask, causal, sizes.n_q, sizes.n_k, where)
    sizes.causal = c
    return _core.io_count(sizes, m, label, bool(backward), schedule, select, M, cache_bytes,
                          _is_double(dtype, where), bool(tuned), num_threads, variant, objective)


def bound(*, n=None, n_q=None, n_k=None, d=None, d_v=None, batch=1, heads=1, kv_heads=None,
          causal=False, scale=None, mask=None, backward=False, M=None, cache_bytes=None,
          dtype="float32"):
    """The I/O lower bounds of the pass for M words, as the "bound" of `ioattn run --json`:
    "regime", "compulsory", "leading", "asymptotic", "explicit" (and "theorem_1_1" for the
    dense backward), with "M", and "z_qk", "z_input" for a mask (Li et al. Thm 4.5)."""
    where = "ioattn.bound"
    sizes = _problem(where, n, n_q, n_k, d, d_v, batch, heads, kv_heads, causal, scale)
    m, c, label = _resolve(mask, causal, sizes.n_q, sizes.n_k, where)
    sizes.causal = c
    return _core.bound(sizes, m, label, bool(backward), M, cache_bytes,
                       _is_double(dtype, where))


def __getattr__(name):
    if name == "torch":  # `ioattn.torch` without importing torch for numpy users
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'ioattn' has no attribute {name!r}")
