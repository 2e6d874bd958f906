#!/usr/bin/env python3
"""Decode attention in torch, timed: the peer of `ioattn decode` (README.md, section Decode).

One decode step of B sequences of n_k cached rows, H query heads grouped over H_kv key/value
heads, n_new new tokens: the grouped matmuls as a CPU user writes them in torch 1.13 (no fused
SDPA there): Q [B, H_kv, G n_new, d] @ K^T [B, H_kv, d, n_k], softmax, @ V [B, H_kv, n_k, d]. The
causal mask within the new tokens is left out (n_new = 1 needs none), which only helps torch.
Prints the median, min and max of --repeat calls after a warm-up, and the cached bytes per
second, as JSON.

Usage: /usr/bin/python3 bench/decode_torch_bench.py [--batch 1] [--heads 32] [--kv-heads 8]
       [--d 128] [--kv-len 65536] [--new-tokens 1] [--threads 2] [--repeat 10]
"""

import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--kv-len", type=int, default=65536)
    ap.add_argument("--new-tokens", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--dtype", choices=["float", "bf16"], default="float")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.float32 if a.dtype == "float" else torch.bfloat16
    g = a.heads // a.kv_heads
    gen = torch.Generator().manual_seed(0)
    q = torch.rand(a.batch, a.kv_heads, g * a.new_tokens, a.d, generator=gen, dtype=torch.float32)
    k = torch.rand(a.batch, a.kv_heads, a.kv_len, a.d, generator=gen, dtype=torch.float32)
    v = torch.rand(a.batch, a.kv_heads, a.kv_len, a.d, generator=gen, dtype=torch.float32)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    scale = a.d ** -0.5

    def step():
        with torch.no_grad():
            s = torch.matmul(q, k.transpose(-1, -2)) * scale
            p = torch.softmax(s, dim=-1)
            return torch.matmul(p, v)

    step()
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    kv_bytes = 2 * a.batch * a.kv_heads * a.kv_len * a.d * k.element_size()
    med = statistics.median(times)
    print(json.dumps({"peer": "torch " + torch.__version__ + " grouped matmul",
                      "threads": a.threads, "dtype": a.dtype, "seconds": med,
                      "seconds_min": min(times), "seconds_max": max(times),
                      "kv_bytes": kv_bytes, "gbps": kv_bytes / med * 1e-9}))


if __name__ == "__main__":
    main()
