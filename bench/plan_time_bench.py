#!/usr/bin/env python3
"""Build, plan and call time per pattern of the sparse suite, from Python (a benchmark, never a
test; README.md, section Python).

Per pattern, N = --n, d = 64, B = H = 1, float32, --threads threads, the fused schedule; each
round empties the plan cache, then times
  build  ioattn.Mask(spec, (N, N))                       the support from its spec
  first  the first ioattn.attention(q, k, v, mask=m)     plans (variants, block lists) and runs
  call   the median of --calls more calls with m          the plans kept with the support
  spec   one call with mask=spec (a string again)        the plan cache's hit: no build, no plan
plan = first - call. Rounds alternate the patterns; printed are medians over rounds with
(min-max), and plan / call, the planning cost in forward calls.

Usage: PYTHONPATH=build/dev/python /usr/bin/python3 bench/plan_time_bench.py
       [--n N] [--rounds R] [--calls C] [--threads T] [--patterns SPEC ...] [--json]
"""

import argparse
import json
import statistics
import time

import numpy as np

SUITE = ["window:256", "causal-window:256", "bigbird:64:2:3", "bigbird-block:64:3:2:3",
         "strided:64", "dilated:256:4", "block:64:0.1", "random:0.02", "powerlaw:32",
         "causal-varlen:4096,2048,6144,4096"]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def one_round(ioattn, spec, q, k, v, args):
    ioattn.clear_plan_cache()
    n = q.shape[2]
    build, m = timed(lambda: ioattn.Mask(spec, (n, n)))
    run = lambda mask: ioattn.attention(q, k, v, mask=mask, schedule="fused",  # noqa: E731
                                        num_threads=args.threads)
    first, _ = timed(lambda: run(m))
    calls = [timed(lambda: run(m))[0] for _ in range(args.calls)]
    spec_call, _ = timed(lambda: run(spec))
    call = statistics.median(calls)
    return {"build": build, "first": first, "call": call, "plan": first - call,
            "spec": spec_call}


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--patterns", nargs="*", default=SUITE)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    import ioattn

    patterns = args.patterns
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(-1, 1, (1, 1, args.n, 64)).astype(np.float32) for _ in range(3))
    rows = {s: [] for s in patterns}
    for _ in range(args.rounds):
        for s in patterns:
            rows[s].append(one_round(ioattn, s, q, k, v, args))
    result = []
    for s in patterns:
        r = {key: summary([x[key] for x in rows[s]]) for key in rows[s][0]}
        r["pattern"] = s
        r["plan_over_call"] = r["plan"]["median"] / r["call"]["median"]
        result.append(r)
    if args.json:
        print(json.dumps({"n": args.n, "d": 64, "threads": args.threads, "rows": result},
                         indent=1))
        return
    print(f"N = {args.n}, d = 64, H = 1, fp32, fused, {args.threads} threads; seconds, median "
          f"(min-max) of {args.rounds} rounds")
    print(f"{'pattern':34} {'build':>22} {'plan':>22} {'call':>22} {'spec again':>22} "
          f"{'plan/call':>9}")
    for r in result:
        cell = lambda k: "%.4f (%.4f-%.4f)" % (r[k]["median"], r[k]["min"], r[k]["max"])  # noqa
        print(f"{r['pattern']:34} {cell('build'):>22} {cell('plan'):>22} {cell('call'):>22} "
              f"{cell('spec'):>22} {r['plan_over_call']:9.1f}")


if __name__ == "__main__":
    main()
