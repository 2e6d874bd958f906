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
