#!/usr/bin/env python3
"""A training loop with a fresh mask every step against the same loop with one cached mask (a
benchmark, never a test; README.md, section Performance).

One step: out, lse = ioattn.attention(q, k, v, mask=m, return_lse=True), then
ioattn.attention_backward(dout, q, k, v, out, lse, mask=m), fused schedule, float32, B = H = 1,
N = --n, d = 64, --threads threads. Per pattern:
  cached  m built once before the loop: every step reuses its support and plans
  fresh   each step builds m anew: random specs with a new seed per step (a new structure), and
          every spec with the plan cache emptied first, so nothing of an earlier step is reused
          (the support, its statistics and both passes' plans are made again each step)
  drawn   each step builds m with a new seed, the plan cache kept, as a training loop that
          draws a mask per step does: a new structure each step (for a seedless spec a new
          support of the same pairs), planned by its family's decision (the spec's first
          structure's tile height and split: support_cache.hpp), its parts built afresh
The three loops alternate, --rounds rounds of --steps steps each; printed are the median step
time of each loop with (min-max) over the rounds' medians, and fresh / cached and drawn /
cached (target <= 1.3).

Usage: PYTHONPATH=build/dev/python /usr/bin/python3 bench/fresh_mask_bench.py
       [--n N] [--steps S] [--rounds R] [--threads T] [--patterns SPEC ...] [--json]
"""

import argparse
import json
import statistics
import time

import numpy as np


def step(ioattn, q, k, v, dout, mask, threads):
    out, lse = ioattn.attention(q, k, v, mask=mask, schedule="fused", return_lse=True,
                                num_threads=threads)
    ioattn.attention_backward(dout, q, k, v, out, lse, mask=mask, schedule="fused",
                              num_threads=threads)


def loop(ioattn, spec, mode, arrays, args, round_index):
    n = arrays[0].shape[2]
    times = []
    cached = ioattn.Mask(spec, (n, n), seed=1) if mode == "cached" else None
    if cached is not None:
        step(ioattn, *arrays, cached, args.threads)  # plans made outside the timed steps
    if mode == "drawn":  # the family's first structure, planned outside the timed steps
        ioattn.clear_plan_cache()
        step(ioattn, *arrays, ioattn.Mask(spec, (n, n), seed=1), args.threads)
    for s in range(args.steps):
        t0 = time.perf_counter()
        if mode == "fresh":
            ioattn.clear_plan_cache()
        if mode != "cached":
            mask = ioattn.Mask(spec, (n, n), seed=2 + round_index * args.steps + s)
        else:
            mask = cached
        step(ioattn, *arrays, mask, args.threads)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--patterns", nargs="*", default=["random:0.02", "window:256"])
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    import ioattn

    rng = np.random.default_rng(0)
    arrays = tuple(rng.uniform(-1, 1, (1, 1, args.n, 64)).astype(np.float32) for _ in range(4))
    result = []
    for spec in args.patterns:
        cached, fresh, drawn = [], [], []
        for r in range(args.rounds):
            cached.append(loop(ioattn, spec, "cached", arrays, args, r))
            fresh.append(loop(ioattn, spec, "fresh", arrays, args, r))
            drawn.append(loop(ioattn, spec, "drawn", arrays, args, r))
        result.append({"pattern": spec, "cached": summary(cached), "fresh": summary(fresh),
                       "fresh_over_cached": summary([f / c for f, c in zip(fresh, cached)]),
                       "drawn": summary(drawn),
                       "drawn_over_cached": summary([d / c for d, c in zip(drawn, cached)])})
    if args.json:
        print(json.dumps({"n": args.n, "d": 64, "threads": args.threads, "steps": args.steps,
                          "rounds": args.rounds, "rows": result}, indent=1))
        return
    print(f"N = {args.n}, d = 64, B = H = 1, fp32, fused, forward + backward per step, "
          f"{args.threads} threads; step seconds, median (min-max) of {args.rounds} rounds' "
          f"medians of {args.steps} steps")
    print(f"{'pattern':20} {'cached mask':>24} {'fresh mask':>24} {'fresh / cached':>20} "
          f"{'drawn mask':>24} {'drawn / cached':>20}")
    for r in result:
        cell = lambda k, f: (f % r[k]["median"]) + (" (" + f + "-" + f + ")") % (  # noqa: E731
            r[k]["min"], r[k]["max"])
        print(f"{r['pattern']:20} {cell('cached', '%.4f'):>24} {cell('fresh', '%.4f'):>24} "
              f"{cell('fresh_over_cached', '%.2f'):>20} {cell('drawn', '%.4f'):>24} "
              f"{cell('drawn_over_cached', '%.2f'):>20}")


if __name__ == "__main__":
    main()
