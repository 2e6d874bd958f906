"""The output pool: the memory of freed outputs of 1 MiB and more is reused by the next call's
outputs, never while an array still holds it; a reused block's old contents never show (rows
with no key give 0 and L = -inf, keys no query sees give dK = dV = 0, an empty decode sequence
0 and -inf, over blocks filled with NaN first); the limit bounds what is kept, 0 keeps nothing;
a refused call (memory) frees what is kept; a malformed IOATTN_OUTPUT_POOL_MB fails the import
with the value named. The index pool: a fresh mask is built on the index arrays of one freed before it, and equals one built without."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ioattn
from conftest import qkv

# float64 [1, 2, 1024, 64]: 1 MiB, the smallest array the pool serves
SHAPE = dict(b=1, h=2, g=2, n_q=1024, n_k=1024, d=64)


@pytest.fixture
def pool():
    """The pool emptied and at its default limit for one test, and at the old limit after."""
    old = ioattn.output_pool_info()["limit"]
    ioattn.set_output_pool_limit(0)
    ioattn.set_output_pool_limit(1 << 30)
    yield
    ioattn.set_output_pool_limit(old)


def poison_pool(arrays):
    """Fills the arrays with NaN and frees them: their blocks go back to the pool so."""
    for a in arrays:
        a[...] = np.nan
    arrays.clear()


def test_freed_outputs_are_reused_and_live_ones_are_not(pool):
    q, k, v = qkv(**SHAPE)
    out, lse = ioattn.attention(q, k, v, return_lse=True)
    before = ioattn.output_pool_info()
    first = out.copy()
    out2 = ioattn.attention(q, k, v)  # out is alive: out2 needs a block of its own
    assert not np.shares_memory(out, out2)
    assert ioattn.output_pool_info()["reused"] == before["reused"]
    del out, out2
    assert ioattn.output_pool_info()["blocks"] == 2
    out3 = ioattn.attention(q, k, v)
    info = ioattn.output_pool_info()
    assert info["reused"] == before["reused"] + 1
    assert info["blocks"] == 1
    np.testing.assert_array_equal(out3, first)  # bitwise: the block's history does not matter


def test_reused_blocks_show_no_old_contents(pool):
    q, k, v = qkv(**SHAPE)
    n = SHAPE["n_q"]
    allowed = np.zeros((n, n), dtype=bool)
    allowed[: n // 2, : n // 2] = np.tril(np.ones((n // 2, n // 2), dtype=bool))
    mask = ioattn.Mask.from_dense(allowed)  # rows n/2.. see no key, keys n/2.. no query
    dout = qkv(**SHAPE, seed=7)[0]
    for schedule in ("fused", "materialized"):
        held = list(ioattn.attention(q, k, v, return_lse=True))
        held += list(ioattn.attention_backward(dout, q, k, v, held[0], held[1]))
        poison_pool(held)
        out, lse = ioattn.attention(q, k, v, mask=mask, schedule=schedule, return_lse=True)
        dq, dk, dv = ioattn.attention_backward(dout, q, k, v, out, lse, mask=mask,
                                               schedule=schedule)
        assert ioattn.output_pool_info()["reused"] > 0
        for x in (out, dq, dk, dv):
            assert np.isfinite(x).all(), schedule
        assert (out[:, :, n // 2:] == 0).all() and (lse[:, :, n // 2:] == -np.inf).all()
        assert (dq[:, :, n // 2:] == 0).all()
        assert (dk[:, :, n // 2:] == 0).all() and (dv[:, :, n // 2:] == 0).all()
        assert np.isfinite(lse[:, :, : n // 2]).all()


def test_reused_blocks_under_decode(pool):
    rng = np.random.default_rng(3)
    b, heads, n_new, d, d_v, cap = 4, 16, 16, 32, 128, 64
    q = rng.standard_normal((b, heads, n_new, d))
    kc = rng.standard_normal((b, 4, cap, d))
    vc = rng.standard_normal((b, 4, cap, d_v))
    held = [ioattn.attention(*qkv(**SHAPE)) for _ in range(2)]
    poison_pool(held)
    out, lse = ioattn.decode(q, kc, vc, [cap, 0, 40, 0], return_lse=True)
    assert out.nbytes == 1 << 20 and ioattn.output_pool_info()["reused"] > 0
    assert (out[1] == 0).all() and (out[3] == 0).all()
    assert (lse[1] == -np.inf).all() and (lse[3] == -np.inf).all()
    assert np.isfinite(out).all() and np.isfinite(lse[0]).all() and np.isfinite(lse[2]).all()


def test_limit_bounds_what_is_kept(pool):
    q, k, v = qkv(**SHAPE)
    outs = [ioattn.attention(q, k, v) for _ in range(3)]
    ioattn.set_output_pool_limit(2 << 20)  # two blocks of 1 MiB
    outs.clear()
    info = ioattn.output_pool_info()
    assert info["blocks"] == 2 and info["kept_bytes"] == 2 << 20
    ioattn.set_output_pool_limit(0)
    info = ioattn.output_pool_info()
    assert info["blocks"] == 0 and info["kept_bytes"] == 0
    allocated = info["allocated"]
    ioattn.attention(q, k, v)  # nothing kept: a new block, freed at once
    info = ioattn.output_pool_info()
    assert info["allocated"] == allocated + 1 and info["blocks"] == 0


def test_malformed_environment_fails_the_import():
    env = dict(os.environ, IOATTN_OUTPUT_POOL_MB="12x")
    r = subprocess.run([sys.executable, "-c", "import ioattn"], env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert "IOATTN_OUTPUT_POOL_MB = '12x'" in r.stderr
    env["IOATTN_OUTPUT_POOL_MB"] = "3"
    r = subprocess.run([sys.executable, "-c", "import ioattn; print(ioattn.output_pool_info()"
                        "['limit'])"], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == str(3 << 20)


def test_fresh_masks_reuse_index_arrays():
    old = ioattn.index_pool_info()["limit"]
    try:
        ioattn.set_index_pool_limit(0)
        ioattn.set_index_pool_limit(512 << 20)
        ioattn.clear_plan_cache()
        spec, shape = "window:256", (4096, 4096)  # 2.1M column words: 16 MiB
        first = ioattn.Mask(spec, shape)
        expected = (first.indptr, first.indices)
        del first
        ioattn.clear_plan_cache()  # the cache held the mask too
        assert ioattn.index_pool_info()["arrays"] == 1
        reused = ioattn.index_pool_info()["reused"]
        again = ioattn.Mask(spec, shape)
        assert ioattn.index_pool_info()["reused"] == reused + 1
        np.testing.assert_array_equal(again.indptr, expected[0])
        np.testing.assert_array_equal(again.indices, expected[1])
        ioattn.set_index_pool_limit(0)
        assert ioattn.index_pool_info()["arrays"] == 0
    finally:
        ioattn.set_index_pool_limit(old)
        ioattn.clear_plan_cache()


def test_memory_pressure_frees_kept_outputs(pool, monkeypatch):
    big = dict(SHAPE, n_q=4096, n_k=4096)  # 4 MiB outputs
    held = [ioattn.attention(*qkv(**big)) for _ in range(2)]
    held.clear()
    assert ioattn.output_pool_info()["kept_bytes"] >= 8 << 20
    monkeypatch.setenv("IOATTN_MAX_BYTES", "1M")  # read on every call
    with pytest.raises(ioattn.Error, match="IOATTN_MAX_BYTES"):  # its workspace: 1.1 MiB
        ioattn.attention(*qkv(**SHAPE), schedule="materialized")
    monkeypatch.delenv("IOATTN_MAX_BYTES")
    # the refused call's own 1 MiB output came back after the release; the 4 MiB blocks went
    assert ioattn.output_pool_info()["kept_bytes"] < 4 << 20
