#!/usr/bin/env python3
"""ioattn from Python, timed (a benchmark, never a test; README.md, section Python).

1. overhead: ioattn.attention(q, k, v) on numpy float32 [1, 8, 4096, 64] against the same
   entry-point call made from C++ in this process (ioattn._core._time_attention: the same
   views, outputs allocated once), interleaved rounds, medians.
2. training step: forward + backward of attention in q, k, v for B=1, H=8, N=8192, d=64,
   float32, on --threads threads: ioattn.torch.attention with a window:256 mask against
   torch's own masked attention (masked_fill + softmax + matmul, autograd), and the dense
   ioattn.torch step against torch's dense one, in the same run. Torch's steps materialize
   B*H*N*N scores; --torch-heads runs them that many heads at a time (same arithmetic, less
   memory) and the step is the sum.

Usage: PYTHONPATH=build/release/python /usr/bin/python3 bench/python_attention_bench.py
       [--rounds R] [--threads T] [--quick] [--json]
"""

import argparse
import json
import math
import statistics
import time

import numpy as np


def median_seconds(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def overhead(args, ioattn):
    rng = np.random.default_rng(0)
    h, n, d = 8, (1024 if args.quick else 4096), 64
    q, k, v = (rng.uniform(-1, 1, (1, h, n, d)).astype(np.float32) for _ in range(3))
    ioattn.attention(q, k, v, num_threads=args.threads)  # warm-up
    py, cpp = [], []
    for _ in range(args.rounds):
        py.append(median_seconds(lambda: ioattn.attention(q, k, v, num_threads=args.threads),
                                 args.repeat))
        cpp.append(statistics.median(
            ioattn._core._time_attention(q, k, v, None, False, args.repeat, args.threads)))
    p, c = statistics.median(py), statistics.median(cpp)
    return {"case": f"overhead H={h} N={n} d={d} fp32", "python_s": p, "cpp_s": c,
            "overhead": p / c - 1.0, "rounds_python": py, "rounds_cpp": cpp}


def window_mask(n, w):
    i = np.arange(n)
    return np.abs(i[:, None] - i[None, :]) <= w


def training(args, ioattn):
    import torch

    import ioattn.torch as itorch

    torch.set_num_threads(args.threads)
    h, n, d, w = 8, (2048 if args.quick else 8192), 64, 256
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.rand(1, h, n, d, generator=g).sub_(0.5).requires_grad_() for _ in range(3))
    dout = torch.rand(1, h, n, d, generator=g)
    spec = f"window:{w}"
    mask = ioattn.Mask(spec, (n, n))
    allowed = torch.from_numpy(window_mask(n, w))
    scale = 1.0 / math.sqrt(d)

    def step(attend):
        for x in (q, k, v):
            x.grad = None
        outs = []
        for h0 in range(0, h, attend.heads):
            sl = slice(h0, h0 + attend.heads)
            out = attend(q[:, sl], k[:, sl], v[:, sl])
            out.backward(dout[:, sl])
            outs.append(out.detach())
        return outs

    def ioattn_sparse(a, b, c):
        return itorch.attention(a, b, c, mask=mask, num_threads=args.threads)

    def ioattn_dense(a, b, c):
        return itorch.attention(a, b, c, num_threads=args.threads)

    def torch_masked(a, b, c):
        s = (a @ b.transpose(-2, -1)) * scale
        return torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1) @ c

    def torch_dense(a, b, c):
        return torch.softmax((a @ b.transpose(-2, -1)) * scale, dim=-1) @ c

    ioattn_sparse.heads = ioattn_dense.heads = h
    torch_masked.heads = torch_dense.heads = args.torch_heads
    runs = {"ioattn window": ioattn_sparse, "torch masked": torch_masked,
            "ioattn dense": ioattn_dense, "torch dense": torch_dense}
    times = {name: [] for name in runs}
    for _ in range(args.rounds):  # interleaved: every peer sees the same machine state
        for name, fn in runs.items():
            times[name].append(median_seconds(lambda: step(fn), 1))
    med = {name: statistics.median(t) for name, t in times.items()}
    return {"case": f"training step B=1 H={h} N={n} d={d} fp32 {args.threads} threads",
            "mask": spec, "seconds": med, "rounds": times,
            "speedup_window": med["torch masked"] / med["ioattn window"],
            "speedup_dense": med["torch dense"] / med["ioattn dense"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5, help="calls per overhead round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-heads", type=int, default=2, help="heads per torch step chunk")
    ap.add_argument("--quick", action="store_true", help="smaller N (a smoke run)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import ioattn

    o = overhead(args, ioattn)
    t = training(args, ioattn)
    if args.json:
        print(json.dumps({"overhead": o, "training": t}, indent=2))
        return
    print(f"{o['case']}: python {o['python_s'] * 1e3:.1f} ms, C++ {o['cpp_s'] * 1e3:.1f} ms, "
          f"overhead {100 * o['overhead']:+.1f}%")
    print(t["case"])
    for name, s in t["seconds"].items():
        print(f"  {name:14s} {s:8.3f} s")
    print(f"  window:256 speedup {t['speedup_window']:.1f}x, dense speedup "
          f"{t['speedup_dense']:.1f}x")


if __name__ == "__main__":
    main()
