#!/usr/bin/env python3
"""Renders the plots of the ioattn program through gnuplot and checks each is a valid SVG that
holds every series' name (ctest: apps:plots). Exits 77 (ctest's SKIP_RETURN_CODE) when gnuplot
is not installed.

  plot_check.py IOATTN SCRATCH_DIR
"""
import csv
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

SKIPPED = 77


def texts_of(svg):
    """Every text run of the SVG (parsing fails on invalid XML)."""
    root = ET.parse(svg).getroot()
    if not root.tag.endswith("svg"):
        raise AssertionError(f"{svg}: root element is {root.tag}, not svg")
    return {"".join(e.itertext()).strip() for e in root.iter() if e.tag.endswith("text")}


def series_of(data):
    """The series' names: the CSV header after its first column (',' was written as ';')."""
    with open(data, newline="") as f:
        header = next(csv.reader(f))
    return [name.replace(";", ",") for name in header[1:]]


def run_plot(ioattn, args, stem):
    svg, data, script = stem + ".svg", stem + ".csv", stem + ".gp"
    for path in (svg, data, script):
        if os.path.exists(path):
            os.remove(path)
    cmd = [ioattn, *args, "--plot", svg]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
    if f"wrote {svg}" not in r.stderr:
        raise AssertionError(f"{' '.join(cmd)}: stderr does not name {svg}: {r.stderr!r}")
    texts = texts_of(svg)
    names = series_of(data)
    missing = [n for n in names if n not in texts]
    if missing or not names:
        raise AssertionError(f"{svg}: series {missing} of {names} not in its text {sorted(texts)}")
    return texts, names


def main():
    ioattn, scratch = sys.argv[1], sys.argv[2]
    if shutil.which("gnuplot") is None:
        print("skipped: gnuplot is not installed (Debian: gnuplot-nox)")
        return SKIPPED
    os.makedirs(scratch, exist_ok=True)
    stem = os.path.join(scratch, "io")
    texts, names = run_plot(ioattn, ["io", "--N", "256", "--d", "16"], stem)
    expected = ["fused", "materialized", "objective io (fewest words)",
                "bound max(compulsory, leading)", "explicit bound (Thm 4.8)"]
    assert names == expected, names
    assert "d^2 = 256" in texts, "no d^2 line label"
    assert any(t.startswith("crossover ") for t in texts), "no crossover line label"
    stem = os.path.join(scratch, "io_backward")
    run_plot(ioattn, ["io", "--pass", "backward", "--N", "256", "--d", "16"], stem)
    stem = os.path.join(scratch, "io_sparse")
    texts, names = run_plot(ioattn, ["io", "--N", "256", "--d", "16", "--pattern", "window:16"],
                            stem)
    assert names == ["tile", "element", "split", "permuted", "materialized",
                     "objective io (fewest words)",
                     "bound max(compulsory, leading) (Li et al. Thm 4.5)"], names
    assert any("M* = Z_input^2/Z_QK" in t for t in texts), "no M* label"
    stem = os.path.join(scratch, "bench")
    texts, names = run_plot(
        ioattn, ["bench", "--suite", "dense", "--quick", "--repeat", "1", "--threads", "2"], stem)
    for name in ("fused", "fused backward", "naive-blas heads-parallel", "naive-blas backward"):
        assert name in names, f"bench plot lacks series {name}: {names}"
    assert any(t.startswith("SGEMM 2048^3 roofline") for t in texts), "no roofline label"
    assert any(t.startswith("FMA peak") for t in texts), "no FMA peak label"
    print("plots: every SVG parses and names its series")
    return 0


if __name__ == "__main__":
    sys.exit(main())
