#!/usr/bin/env python3
"""A loop of calls on one mask through the Python module, timed per call, for one or more
builds of the module alternated run by run (a benchmark, never a test; docs/performance.md,
section 6).

One run: a child process builds ioattn.Mask(spec, (N, N)), makes one call untimed (it plans),
then times --calls calls of ioattn.attention (forward) or ioattn.attention_backward (backward)
on it, fused, float32, B = H = 1, d = 64, --threads threads, and prints the median. Each of
--runs rounds runs every build once, in rotated order; printed per pattern are each build's
median over the rounds with (min-max), and the first build's time over each other's per round.

Usage: /usr/bin/python3 bench/mask_loop_bench.py --builds build/dev/python [OTHER/python ...]
       [--n N] [--calls C] [--runs R] [--pass forward|backward] [--patterns SPEC ...]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def child(args):
    import numpy as np

    import ioattn

    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal((1, 1, args.n, 64), dtype=np.float32) for _ in range(4))
    mask = ioattn.Mask(args.patterns[0], (args.n, args.n), seed=3)
    out, lse = ioattn.attention(q, k, v, mask=mask, schedule="fused", return_lse=True,
                                num_threads=args.threads)

    def call():
        if args.pass_ == "forward":
            ioattn.attention(q, k, v, mask=mask, schedule="fused", return_lse=True,
                             num_threads=args.threads)
        else:
            ioattn.attention_backward(dout, q, k, v, out, lse, mask=mask, schedule="fused",
                                      num_threads=args.threads)

    call()  # the backward's plan
    times = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    print(statistics.median(times))


def spread(values):
    return f"{statistics.median(values):.4f} ({min(values):.4f}-{max(values):.4f})"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--builds", nargs="+", default=["build/dev/python"])
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pass", dest="pass_", choices=("forward", "backward"), default="forward")
    p.add_argument("--patterns", nargs="+", default=["window:256", "random:0.02"])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    print(f"N = {args.n}, d = 64, B = H = 1, fp32, fused, {args.pass_}, {args.threads} threads; "
          f"median seconds of {args.calls} calls per run, median (min-max) over {args.runs} runs")
    for spec in args.patterns:
        seconds = {b: [] for b in args.builds}
        for r in range(args.runs):
            shift = r % len(args.builds)
            for build in args.builds[shift:] + args.builds[:shift]:
                cmd = [sys.executable, __file__, "--child", "--n", str(args.n), "--calls",
                       str(args.calls), "--threads", str(args.threads), "--pass", args.pass_,
                       "--patterns", spec]
                env = dict(os.environ, PYTHONPATH=os.path.abspath(build))
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                seconds[build].append(float(out.stdout.strip()))
        first = args.builds[0]
        for build in args.builds:
            line = f"{spec:<20} {build:<40} {spread(seconds[build])}"
            if build != first:
                ratios = [a / b for a, b in zip(seconds[first], seconds[build])]
                line += f"   {first} / this: {spread(ratios)}"
            print(line)


if __name__ == "__main__":
    main()
