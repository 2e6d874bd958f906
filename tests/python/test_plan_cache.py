"""The plan cache: a mask given again as a spec string, CSR arrays, a scipy matrix or a
boolean array shares the support and plans of the first (hit), other masks miss, the least
recently used is evicted beyond the size set, size 0 turns it off, and results are bitwise the
same with and without the cache."""

import numpy as np
import pytest
import scipy.sparse

import ioattn
from conftest import qkv


@pytest.fixture
def cache_of():
    """Empties the cache at a size for one test; restores the size after."""
    old = ioattn.plan_cache_info()["capacity"]

    def set_size(n):
        ioattn.clear_plan_cache()
        ioattn.set_plan_cache_size(n)

    yield set_size
    ioattn.clear_plan_cache()
    ioattn.set_plan_cache_size(old)


def test_hit_and_miss(cache_of):
    cache_of(8)
    a = ioattn.Mask("window:3+global:2", (40, 40))
    b = ioattn.Mask("window:3+global:2", (40, 40))
    assert a._shares_plans(b)
    info = ioattn.plan_cache_info()
    assert (info["hits"], info["misses"], info["entries"]) == (1, 1, 1)
    c = ioattn.Mask.from_scipy(scipy.sparse.csr_matrix(a.to_scipy()))
    assert c._shares_plans(a)
    d = ioattn.Mask.from_dense(a.to_scipy().toarray())
    assert d._shares_plans(a)
    assert ioattn.plan_cache_info()["hits"] == 3
    e = ioattn.Mask("window:3+global:2", (40, 41))
    assert not e._shares_plans(a)
    assert ioattn.plan_cache_info()["misses"] == 2


def test_eviction(cache_of):
    cache_of(2)
    a = ioattn.Mask("window:1", (20, 20))
    b = ioattn.Mask("window:2", (20, 20))
    assert ioattn.Mask("window:1", (20, 20))._shares_plans(a)  # a most recent
    ioattn.Mask("window:3", (20, 20))  # evicts b
    info = ioattn.plan_cache_info()
    assert (info["evictions"], info["entries"], info["capacity"]) == (1, 2, 2)
    assert not ioattn.Mask("window:2", (20, 20))._shares_plans(b)
    assert ioattn.Mask("window:2", (20, 20)) == b


def test_size_zero_is_off(cache_of):
    cache_of(0)
    a = ioattn.Mask("causal", (16, 16))
    assert not ioattn.Mask("causal", (16, 16))._shares_plans(a)
    assert ioattn.plan_cache_info()["entries"] == 0


def test_same_results_with_and_without(cache_of):
    q, k, v = qkv(b=1, h=2, g=2, n_q=150, n_k=150, d=16, dtype=np.float32, seed=2)
    spec = "window:12+global:2"
    cache_of(0)
    want, want_lse = ioattn.attention(q, k, v, mask=spec, return_lse=True)
    cache_of(4)
    for _ in range(3):  # the first builds and plans, the others reuse both
        out, lse = ioattn.attention(q, k, v, mask=spec, return_lse=True)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(lse, want_lse)
    assert ioattn.plan_cache_info()["hits"] == 2
    m = scipy.sparse.csr_matrix(ioattn.Mask(spec, (150, 150)).to_scipy())
    np.testing.assert_array_equal(ioattn.attention(q, k, v, mask=m), want)


def test_a_spec_drawn_again_is_planned_by_its_family(cache_of):
    """A seeded spec drawn with a new seed is a new structure, planned by the decision its
    family (the spec and shape) kept for the first one; the cache keeps a family's two most
    recent structures; the results are bitwise those of a mask planned afresh."""
    cache_of(8)
    n = 300
    q, k, v = qkv(b=1, h=2, g=2, n_q=n, n_k=n, d=16, dtype=np.float32, seed=5)
    out = {}
    for seed in range(1, 5):
        m = ioattn.Mask("random:0.05", (n, n), seed=seed)
        out[seed] = ioattn.attention(q, k, v, mask=m, schedule="fused")
    info = ioattn.plan_cache_info()
    assert info["family_plans"] == 3  # seeds 2, 3 and 4, the forward's plan each
    assert (info["misses"], info["entries"], info["evictions"]) == (4, 2, 2)
    cache_of(0)  # no cache, no family: every plan made afresh
    for seed in (2, 4):
        fresh = ioattn.attention(q, k, v, mask=ioattn.Mask("random:0.05", (n, n), seed=seed),
                                 schedule="fused")
        np.testing.assert_array_equal(fresh, out[seed])
    assert ioattn.plan_cache_info()["family_plans"] == 0
