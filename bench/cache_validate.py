#!/usr/bin/env python3
"""Counted I/O against a simulated LRU cache (docs/design.md section 8).

Runs bench/cache_driver.cpp (ioattn_cache_driver) under valgrind's callgrind cache simulator:
one cache level of C words (the LL cache: 16-way, 64-byte lines, LRU, write-allocate,
write-back; D1 shrunk to two lines so that every access reaches it), one thread, AVX2 kernels
(valgrind 3.19 cannot run AVX-512; --isa sse2 for a build without them), fp32. The simulated
traffic of a kernel run is
    64 bytes x (LL read misses + LL misses that evict a dirty line)
minus the driver's closing sweep (see cache_driver.cpp). LL write misses are not counted: a
write-allocate cache fetches a line before writing it, which the model does not (a word written
is one word moved); every kernel writes its rows whole, as a streaming store would. The column
`alloc` adds them back for reference.

Modes:
  --check   the assertions of the `cache` ctest on small shapes: for each schedule and pass,
            dense and three sparse patterns, and the EXTRA cases, simulated traffic with the
            cache at 2M words within 25% of the counted words and at 4M within 10% (sparse at
            4M: at most that much above; see within()), and the crossover M under LRU (cache at
            2M) within a factor 2 of
            the model's, and at each M of that sweep (and of one at d = 128, where the
            materialized schedule wins at M = d^2 in the backward) the schedule --select cost picks
            (lower counted I/O at M, as --cache-bytes 2M words plans it) moving at most 1.25x
            what the other moves under the cache of 2M. Exit 1 on any failure.
  default   the validation table over a sweep of M with the cache at M, 2M and 4M words, the
            model's and LRU's crossovers; --csv FILE and --plot FILE.svg (gnuplot) write them.
"""
import argparse
import concurrent.futures
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import typing

LINE = 64
WORD = 4


class Driver(typing.NamedTuple):
    """ioattn_cache_driver and the ISA target it runs (IOATTN_ISA; valgrind cannot run
    AVX-512)."""
    path: str
    isa: str


def simulate(driver, pas, schedule, n, d, pattern, m, cache_words):
    """Counted and simulated words of one kernel run; None when M fits no tiling."""
    cache_bytes = cache_words * WORD
    flush = max(4 * cache_words, 1 << 16)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--simulate-wb=yes",
               "--D1=128,2,64", f"--LL={cache_bytes},16,64", "--collect-atstart=no",
               f"--callgrind-out-file={out}", driver.path, pas, schedule, str(n), str(d), pattern,
               str(m), str(flush)]
        env = dict(os.environ, IOATTN_ISA=driver.isa)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr}")
        counted = json.loads(r.stdout.strip().splitlines()[-1])
        if counted.get("no_tiling"):
            return None
        events, totals = None, None
        with open(out) as f:
            for line in f:
                if line.startswith("events:"):
                    events = line.split()[1:]
                elif line.startswith("totals:") or line.startswith("summary:"):
                    totals = [int(x) for x in line.split()[1:]]
        ev = dict(zip(events, totals + [0] * (len(events) - len(totals))))
    sweep_lines = math.ceil(flush * WORD / LINE)
    lines = ev.get("DLmr", 0) + ev.get("DLdmr", 0) + ev.get("DLdmw", 0) - sweep_lines
    return {"counted": counted["total"], "peak": counted["peak"],
            "tiling": f"{counted['rows']}x{counted['cols']}",
            "lru": lines * LINE / WORD, "alloc": ev.get("DLmw", 0) * LINE / WORD}


def run_all(driver, jobs, workers):
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {key: pool.submit(simulate, driver, *key) for key in jobs}
        return {key: f.result() for key, f in futures.items()}


def crossover(ms, words):
    """Smallest M of the sweep from which fused moves no more than materialized (None: never)."""
    best = None
    for m in reversed(ms):
        f, t = words.get(("fused", m)), words.get(("materialized", m))
        if f is None or t is None or f > t:
            break
        best = m
    return best


def configs(n, d, patterns):
    for pas in ("forward", "backward"):
        for pattern in patterns:
            for schedule in ("fused", "materialized"):
                yield pas, schedule, pattern


def fit_shape(pattern):
    """(d, M) of the 2M / 4M agreement: dense at d = 16, M = 2048; a sparse pattern at d = 64,
    M = 8192, where the sparse fused kernels' footprint (gathered rows, walked indices) still
    leaves tilings of more than a few rows."""
    return (16, 2048) if pattern == "dense" else (64, 8192)


def within(pattern, ratio, tol, factor):
    """Dense, and sparse with the cache at 2M: |ratio - 1| <= tol. Sparse at 4M: ratio <= 1 + tol;
    a cache of 4M words may move less than counted, keeping the K/V rows that consecutive row
    blocks of a band share, which the schedule for M does not plan (at 4M: the fused forward of
    window:48 0.62 and of window:64 0.66, the materialized schedules 0.68-0.89; docs/performance.md
    section 8)."""
    if pattern == "dense" or factor == 2:
        return abs(ratio - 1) <= tol
    return ratio <= 1 + tol


# Agreement cases at shapes of their own (pass, schedule, pattern, d, M), N = 512: the dense
# materialized forward at d = 64, where b = 32 leaves room for whole feature rows (Q_i held,
# O_i in one pass: with chunks of b, LRU at 4M moved 0.75x the count), and a narrow band's
# fused forward and backward.
EXTRA = [("forward", "materialized", "dense", 64, 8192),
         ("forward", "fused", "window:64", 64, 8192),
         ("backward", "fused", "window:64", 64, 8192)]


def agreement_cases(patterns):
    """(pass, schedule, pattern, d, M) of the 2M / 4M agreement: every config at its fit
    shape, then EXTRA."""
    for pas, schedule, pattern in configs(0, 0, patterns):
        yield (pas, schedule, pattern) + fit_shape(pattern)
    yield from EXTRA


def check(driver, workers, patterns):
    n, d = 512, 16
    sweep = [256, 512, 1024, 2048, 4096, 8192]  # the crossover
    jobs = set()
    for pas, schedule, pattern, dp, m_fit in agreement_cases(patterns):
        for f in (2, 4):
            jobs.add((pas, schedule, n, dp, pattern, m_fit, f * m_fit))
    for pas in ("forward", "backward"):
        for schedule in ("fused", "materialized"):
            for m in sweep:
                jobs.add((pas, schedule, n, d, "dense", m, 2 * m))
            for m in SELECT_SWEEP:  # where both fit and materialized is the cheaper one
                jobs.add((pas, schedule, n, SELECT_D, "dense", m, 2 * m))
    res = run_all(driver, sorted(jobs), workers)
    failures = []
    for pas, schedule, pattern, dp, m_fit in agreement_cases(patterns):
        for f, tol in ((2, 0.25), (4, 0.10)):
            r = res[(pas, schedule, n, dp, pattern, m_fit, f * m_fit)]
            ratio = r["lru"] / r["counted"]
            ok = within(pattern, ratio, tol, f)
            print(f"{pas:8} {schedule:12} {pattern:10} d={dp} M={m_fit} cache={f}M "
                  f"tiling {r['tiling']:>7} counted {r['counted']:>9} lru {r['lru']:>11.0f} "
                  f"ratio {ratio:.3f} "
                  f"{'ok' if ok else 'FAIL (tolerance %d%%)' % (100 * tol)}")
            if not ok:
                failures.append((pas, schedule, pattern, f))
    for pas in ("forward", "backward"):
        model = {(s, m): res[(pas, s, n, d, "dense", m, 2 * m)]["counted"]
                 for s in ("fused", "materialized") for m in sweep
                 if res[(pas, s, n, d, "dense", m, 2 * m)] is not None}
        lru = {(s, m): res[(pas, s, n, d, "dense", m, 2 * m)]["lru"]
               for s in ("fused", "materialized") for m in sweep
               if res[(pas, s, n, d, "dense", m, 2 * m)] is not None}
        cm, cl = crossover(sweep, model), crossover(sweep, lru)
        ok = cm is not None and cl is not None and max(cm, cl) <= 2 * min(cm, cl)
        print(f"{pas:8} crossover: model M = {cm}, LRU (cache 2M) M = {cl} "
              f"{'ok' if ok else 'FAIL (not within a factor 2)'}")
        if not ok:
            failures.append((pas, "crossover"))
        failures += select_cost(pas, sweep, model, lru)
        words = {(s, m): res[(pas, s, n, SELECT_D, "dense", m, 2 * m)]
                 for s in ("fused", "materialized") for m in SELECT_SWEEP}
        words = {k: r for k, r in words.items() if r is not None}
        failures += select_cost(pas, SELECT_SWEEP, {k: r["counted"] for k, r in words.items()},
                                {k: r["lru"] for k, r in words.items()}, d=SELECT_D)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all cache checks passed")
    return 0


# d = 128 (d^2 = 16384), N = 512: both schedules fit from M = 8192 (forward) and 16384
# (backward) on, where the counts are close (forward 8192: 4.33 M fused, 4.52 M materialized)
# and the backward's cost picks materialized at 16384 (6.36 M against 8.88 M): at d <= 64 the
# fused schedule fits only where it is already the cheaper one
SELECT_D, SELECT_SWEEP = 128, [8192, 16384]


def select_cost(pas, sweep, model, lru, tol=0.25, d=16):
    """--cache-bytes C plans for M = C / 2 words (MemoryModel::for_cache), and --select cost
    then takes the schedule of lower counted I/O at M: under the simulated cache of C = 2M
    words it must move at most (1 + tol) x what the other schedule moves there (equal or
    cheaper away from the crossover; near it the two are close and either may win)."""
    failures = []
    for m in sweep:
        if ("fused", m) not in model or ("materialized", m) not in model:
            continue
        pick = min(("fused", "materialized"), key=lambda s: model[(s, m)])
        other = "materialized" if pick == "fused" else "fused"
        ratio = lru[(pick, m)] / lru[(other, m)]
        ok = ratio <= 1 + tol
        print(f"{pas:8} select cost d={d} M={m:5} (cache {2 * m} words): picks {pick:12} "
              f"LRU {lru[(pick, m)]:>11.0f} vs {other} {lru[(other, m)]:>11.0f} "
              f"ratio {ratio:.3f} {'ok' if ok else 'FAIL (tolerance %d%%)' % (100 * tol)}")
        if not ok:
            failures.append((pas, "select", m))
    return failures


def table(driver, workers, n, d, patterns, ms, csv_path, plot_path):
    jobs = []
    for pas, schedule, pattern in configs(n, d, patterns):
        for m in ms:
            for f in (1, 2, 4):
                jobs.append((pas, schedule, n, d, pattern, m, f * m))
    res = run_all(driver, jobs, workers)
    rows = []
    for pas, schedule, pattern in configs(n, d, patterns):
        for m in ms:
            r = [res[(pas, schedule, n, d, pattern, m, f * m)] for f in (1, 2, 4)]
            if r[0] is None:
                continue
            rows.append({"pass": pas, "schedule": schedule, "pattern": pattern, "M": m,
                         "tiling": r[0]["tiling"], "counted": r[0]["counted"],
                         "lru_M": r[0]["lru"], "lru_2M": r[1]["lru"], "lru_4M": r[2]["lru"],
                         "alloc_2M": r[1]["alloc"]})
    head = ["pass", "schedule", "pattern", "M", "tiling", "counted", "lru_M", "lru_2M", "lru_4M",
            "alloc_2M"]
    print(f"ioattn counted I/O vs simulated LRU (valgrind callgrind, 16-way, 64 B lines, "
          f"write-back), N = {n}, d = {d}, fp32, 1 thread, {driver.isa} kernels")
    print("| " + " | ".join(head[:6]) + " | LRU at M | at 2M | at 4M |")
    print("|" + "---|" * 9)
    for r in rows:
        c = r["counted"]
        print(f"| {r['pass']} | {r['schedule']} | {r['pattern']} | {r['M']} | {r['tiling']} | "
              f"{c:,} | {r['lru_M'] / c:.2f}x | {r['lru_2M'] / c:.2f}x | {r['lru_4M'] / c:.2f}x |")
    for pas in ("forward", "backward"):
        for pattern in patterns:
            model = {(r["schedule"], r["M"]): r["counted"] for r in rows
                     if r["pass"] == pas and r["pattern"] == pattern}
            lru = {(r["schedule"], r["M"]): r["lru_2M"] for r in rows
                   if r["pass"] == pas and r["pattern"] == pattern}
            print(f"crossover {pas} {pattern}: model M = {crossover(ms, model)}, "
                  f"LRU (cache 2M) M = {crossover(ms, lru)}")
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=head)
            w.writeheader()
            w.writerows(rows)
    if plot_path:
        plot(rows, patterns, n, d, plot_path)


def plot(rows, patterns, n, d, path):
    if shutil.which("gnuplot") is None:
        sys.exit("cache_validate: gnuplot not found (Debian: gnuplot-nox); the CSV is written")
    base = os.path.splitext(path)[0]
    series = []
    for pas in ("forward", "backward"):
        for schedule in ("fused", "materialized"):
            pts = [r for r in rows if r["pass"] == pas and r["schedule"] == schedule
                   and r["pattern"] == "dense"]
            if not pts:
                continue
            dat = f"{base}.{pas}.{schedule}.dat"
            with open(dat, "w") as f:
                for r in pts:
                    f.write(f"{r['M']} {r['counted']} {r['lru_2M']} {r['lru_4M']}\n")
            series.append((pas, schedule, dat))
    script = [f"set terminal svg size 900,560 dynamic", f"set output '{path}'",
              f"set title 'counted I/O vs simulated LRU cache, dense, N = {n}, d = {d}'",
              "set logscale xy", "set xlabel 'M (words)'", "set ylabel 'words moved'",
              "set key outside right", "set grid"]
    parts = []
    for pas, schedule, dat in series:
        parts.append(f"'{dat}' using 1:2 with linespoints title '{pas} {schedule} counted'")
        parts.append(f"'{dat}' using 1:3 with points title '{pas} {schedule} LRU at 2M'")
    script.append("plot " + ", ".join(parts))
    with open(base + ".gp", "w") as f:
        f.write("\n".join(script) + "\n")
    subprocess.run(["gnuplot", base + ".gp"], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--driver", required=True, help="path of ioattn_cache_driver")
    ap.add_argument("--check", action="store_true", help="the ctest assertions")
    ap.add_argument("--N", type=int, default=512)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--patterns", default="dense,window:48,random:0.1,bigbird:16:2:3",
                    help="dense and sparse specs (--check: N = 512; dense d = 16, M = 2048; "
                         "sparse d = 64, M = 8192)")
    ap.add_argument("--M-range", default="256:16384", help="powers of two lo:hi")
    ap.add_argument("--jobs", type=int, default=2, help="valgrind processes at once")
    ap.add_argument("--isa", default="avx2", choices=["avx2", "sse2"],
                    help="ISA target to run (IOATTN_ISA; valgrind cannot run avx512)")
    ap.add_argument("--csv")
    ap.add_argument("--plot")
    a = ap.parse_args()
    driver = Driver(a.driver, a.isa)
    if shutil.which("valgrind") is None:
        sys.exit("cache_validate: valgrind not found (Debian package valgrind)")
    if a.check:
        sys.exit(check(driver, a.jobs, a.patterns.split(",")))
    lo, hi = (int(x) for x in a.M_range.split(":"))
    ms = [1 << k for k in range(lo.bit_length() - 1, hi.bit_length())]
    table(driver, a.jobs, a.N, a.d, a.patterns.split(","), ms, a.csv, a.plot)


if __name__ == "__main__":
    main()
