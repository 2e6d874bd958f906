"""Shared by the Python tests: seeded inputs, the numpy float64 reference of attention and its
gradients (written here, independent of ioattn), and the allowed pairs of each deterministic
pattern family written as predicates (bottom-right alignment: query i sits at key position
i + n_k - n_q)."""

import numpy as np
import pytest


def make(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(dtype)


def qkv(b=2, h=4, g=2, n_q=13, n_k=17, d=8, d_v=None, dtype=np.float64, seed=0):
    d_v = d if d_v is None else d_v
    return (make((b, h, n_q, d), dtype, seed), make((b, g, n_k, d), dtype, seed + 1),
            make((b, g, n_k, d_v), dtype, seed + 2))


def _expand(x, heads):
    return np.repeat(x, heads // x.shape[1], axis=1)  # query head h reads kv head h // group


def reference(q, k, v, allowed=None, scale=None):
    """(out, lse, P) in float64; allowed: (n_q, n_k) booleans or None (every pair)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    kk, vv = _expand(k, q.shape[1]), _expand(v, q.shape[1])
    s = scale * q @ kk.swapaxes(-1, -2)
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    row = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, row, out=np.zeros_like(e), where=row > 0)
    with np.errstate(divide="ignore"):
        lse = np.where(row[..., 0] > 0, np.log(row[..., 0]) + m[..., 0], -np.inf)
    return p @ vv, lse, p


def reference_backward(dout, q, k, v, allowed=None, scale=None):
    """(dq, dk, dv) in float64: dV = P^T dO, dS = P o (dO V^T - rowsum(dO o O)),
    dQ = scale dS K, dK = scale dS^T Q, summed over the query heads of a kv head."""
    q, k, v, dout = (np.asarray(x, np.float64) for x in (q, k, v, dout))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    out, _, p = reference(q, k, v, allowed, scale)
    kk, vv = _expand(k, q.shape[1]), _expand(v, q.shape[1])
    dv = p.swapaxes(-1, -2) @ dout
    ds = p * (dout @ vv.swapaxes(-1, -2) - (dout * out).sum(axis=-1, keepdims=True))
    dq = scale * ds @ kk
    dk = scale * ds.swapaxes(-1, -2) @ q

    def fold(x):  # sum the query heads that share a kv head
        b, h, n, c = x.shape
        g = k.shape[1]
        return x.reshape(b, g, h // g, n, c).sum(axis=2)

    return dq, fold(dk), fold(dv)


def positions(n_q, n_k):
    """(i', j) grids: i' = i + n_k - n_q, the query's position among the keys."""
    i = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return i, j


def allowed_of(spec, n_q, n_k):
    """The allowed pairs of a deterministic spec (terms joined by + and &, no parentheses),
    from the definitions of its terms."""
    if "+" in spec:
        return np.logical_or.reduce([allowed_of(t, n_q, n_k) for t in spec.split("+")])
    if "&" in spec:
        return np.logical_and.reduce([allowed_of(t, n_q, n_k) for t in spec.split("&")])
    i, j = positions(n_q, n_k)
    name, *args = spec.split(":")
    a = [int(x) for x in args]
    if name == "dense":
        return np.ones((n_q, n_k), bool)
    if name == "causal":
        return j <= i
    if name == "window":
        return np.abs(i - j) <= a[0]
    if name == "causal-window":
        return (i - j >= 0) & (i - j <= a[0])
    if name == "dilated":
        w, s = a
        return (np.abs(i - j) <= w * s) & ((i - j) % s == 0)
    if name == "global":
        g = a[0]
        return (j < g) | ((i >= 0) & (i < g)) | np.zeros((n_q, n_k), bool)
    if name == "strided":
        (l,) = a
        same_block = np.floor_divide(np.maximum(i, 0), l) == j // l
        return (j <= i) & (same_block | (j % l == l - 1))
    raise ValueError(spec)


def tolerance(dtype):
    return 1e-12 if dtype == np.float64 else 2e-5


def assert_close(got, want, dtype, what=""):
    got = np.asarray(got, np.float64)
    inf = np.isinf(want)
    assert np.array_equal(np.isinf(got), inf), f"{what}: infinities differ"
    assert np.array_equal(got[inf], want[inf]), f"{what}: infinities differ"
    err = np.max(np.abs(got[~inf] - want[~inf]), initial=0.0)
    assert err <= tolerance(dtype) * max(1.0, np.max(np.abs(want[~inf]), initial=0.0)), \
        f"{what}: max error {err}"


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    return request.param
