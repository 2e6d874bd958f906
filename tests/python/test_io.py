"""ioattn.io_count and ioattn.bound: the keys of `ioattn run --json`, counted I/O equal to the
closed form for every pass, schedule and mask, the same numbers as `ioattn run --count-io`
for the same problem, and bounds that sit below the counts."""

import json
import os
import subprocess

import pytest

import ioattn

IO_KEYS = {"reads", "writes", "total", "peak_resident", "closed_form_total",
           "matches_closed_form", "ratio_to_bound"}
BOUND_KEYS = {"regime", "compulsory", "leading", "asymptotic", "explicit"}


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("schedule", ["auto", "fused", "materialized"])
@pytest.mark.parametrize("mask", [None, "window:8", "bigbird:4:2:3"])
def test_io_count(backward, schedule, mask):
    r = ioattn.io_count(n=200, d=16, heads=2, mask=mask, backward=backward, schedule=schedule,
                        M=2400)
    assert r["pass"] == ("backward" if backward else "forward")
    assert r["pattern"] == (mask or "dense")
    assert r["M"] == 2400
    assert r["selected_by"] == ("cost" if schedule == "auto" else None)
    if schedule != "auto":
        assert r["schedule"] == schedule
    assert r["tiling"]["schedule"] == r["schedule"]
    assert set(r["io"]) == IO_KEYS and BOUND_KEYS <= set(r["bound"])
    io = r["io"]
    assert io["matches_closed_form"] and io["total"] == io["closed_form_total"]
    assert io["total"] == io["reads"] + io["writes"] and 0 < io["peak_resident"] <= 2400
    assert io["total"] >= r["bound"]["compulsory"]
    assert ("z_qk" in r) == (mask is not None)


@pytest.mark.skipif(not os.environ.get("IOATTN_BINARY"), reason="needs the ioattn program")
@pytest.mark.parametrize("args", [
    dict(cli=["--pass", "forward"], py=dict()),
    dict(cli=["--pass", "backward", "--schedule", "materialized"],
         py=dict(backward=True, schedule="materialized")),
    dict(cli=["--pattern", "window:8", "--schedule", "fused"],
         py=dict(mask="window:8", schedule="fused")),
    dict(cli=["--causal", "--heads", "4", "--kv-heads", "2", "--dtype", "double"],
         py=dict(causal=True, heads=4, kv_heads=2, dtype="float64")),
])
def test_io_count_matches_the_program(args):
    cli = [os.environ["IOATTN_BINARY"], "run", "--N", "150", "--d", "16", "--M", "1200",
           "--count-io", "--json", *args["cli"]]
    run = json.loads(subprocess.run(cli, check=True, capture_output=True, text=True).stdout)
    py = ioattn.io_count(n=150, d=16, M=1200, **args["py"])
    for key in ("schedule", "selected_by", "M", "pass", "n_q", "n_k", "d", "heads",
                "kv_heads", "causal"):
        assert py[key] == run[key], key
    for key in ("rows", "cols"):
        assert py["tiling"][key] == run["tiling"][key], key
    for key in ("reads", "writes", "total", "peak_resident", "closed_form_total"):
        assert py["io"][key] == run["io"][key], key
    for key in BOUND_KEYS:
        assert py["bound"][key] == pytest.approx(run["bound"][key], rel=1e-12), key


def test_io_count_objective():
    # random:0.05 at M = 16384: the speed plan runs the element variant, the io plan the tile
    # variant, which moves fewer than half the words
    io = ioattn.io_count(n=1024, d=64, mask="random:0.05", M=16384)
    speed = ioattn.io_count(n=1024, d=64, mask="random:0.05", M=16384, objective="speed")
    assert io["objective"] == "io" and speed["objective"] == "speed"
    assert io["planned_for"] <= 16384 and speed["planned_for"] == 16384
    assert io["io"]["matches_closed_form"] and speed["io"]["matches_closed_form"]
    assert 2 * io["io"]["total"] < speed["io"]["total"]
    # the dense materialized forward at d = 64, M = 8192: 32 x 32 tiles, whole feature rows
    dense = ioattn.io_count(n=512, d=64, M=8192, schedule="materialized")
    assert dense["tiling"]["depth"] == 64 and dense["io"]["total"] == 16 * 102432
    with pytest.raises(ValueError, match="objective 'fast'"):
        ioattn.io_count(n=64, d=8, objective="fast")


def test_bound():
    small, large = ioattn.bound(n=4096, d=64, M=1024), ioattn.bound(n=4096, d=64, M=8192)
    assert small["regime"] == "small-cache" and large["regime"] == "large-cache"  # M vs d^2
    assert set(small) >= BOUND_KEYS | {"M"}
    assert small["leading"] > large["leading"]
    back = ioattn.bound(n=4096, d=64, M=8192, backward=True)
    assert "theorem_1_1" in back and back["compulsory"] > large["compulsory"]
    sparse = ioattn.bound(n=4096, d=64, M=8192, mask="window:64")
    assert sparse["z_qk"] == ioattn.Mask("window:64", (4096, 4096)).nnz
    assert sparse["leading"] < large["leading"]
    with pytest.raises(ValueError):
        ioattn.bound(n=64, d=16, M=0)


@pytest.mark.parametrize("dtype,word", [("float32", 4), ("float64", 8)])
def test_cache_bytes_plans_for_half_the_cache(dtype, word):
    cache = 1 << 18  # 256 KiB
    r = ioattn.io_count(n=200, d=16, heads=2, mask="window:8", cache_bytes=cache, dtype=dtype)
    assert r["M"] == cache // word // 2
    assert r["io"]["peak_resident"] <= r["M"]
    same = ioattn.io_count(n=200, d=16, heads=2, mask="window:8", M=cache // word // 2,
                           dtype=dtype)
    assert r == same
    b = ioattn.bound(n=200, d=16, backward=True, cache_bytes=cache, dtype=dtype)
    assert b["M"] == cache // word // 2


def test_cache_bytes_in_the_calls_is_the_same_plan_as_its_M():
    import numpy as np
    from conftest import make, qkv
    q, k, v = qkv(b=1, h=2, g=2, n_q=96, n_k=80, d=16, dtype=np.float32, seed=11)
    cache = 96 * 1024
    out, lse = ioattn.attention(q, k, v, mask="window:6", cache_bytes=cache, return_lse=True)
    ref, ref_lse = ioattn.attention(q, k, v, mask="window:6", M=cache // 8, return_lse=True)
    assert np.array_equal(out, ref) and np.array_equal(lse, ref_lse)
    dout = make(out.shape, np.float32, 12)
    got = ioattn.attention_backward(dout, q, k, v, out, lse, mask="window:6", cache_bytes=cache)
    want = ioattn.attention_backward(dout, q, k, v, out, lse, mask="window:6", M=cache // 8)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_cache_bytes_errors_name_the_values():
    with pytest.raises(ValueError, match=r"ioattn.io_count: M = 4096 and cache_bytes = 65536"):
        ioattn.io_count(n=64, d=16, M=4096, cache_bytes=65536)
    with pytest.raises(ValueError, match=r"ioattn.bound: cache_bytes = 7 leaves no word"):
        ioattn.bound(n=64, d=16, cache_bytes=7)
    with pytest.raises(ValueError, match=r"cache_bytes = -1"):
        ioattn.io_count(n=64, d=16, cache_bytes=-1)
