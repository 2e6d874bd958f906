#!/usr/bin/env python3
"""Whether two builds of the program plan and compute alike (a check beside the benchmarks, for
changes to the planner that must not change its choices).

Per pattern and pass, runs `ioattn run --N N --d 64 --pattern P --pass PASS --json` with each
program at --threads T (and with --count-io, the io objective's plans over a grid of memories
and their counted run, for the patterns of --io-patterns) and compares the fields that must be
bitwise equal: the schedule, the variant, the tiling, the variant plan, the output digest (and
the counted I/O). Each thread count is compared with the old program's at the same count and
with the new program's at the first. Prints one line per case and exits 1 on any difference.

Usage: /usr/bin/python3 bench/plan_identity.py OLD_PROGRAM NEW_PROGRAM
       [--n N] [--threads T ...] [--patterns SPEC ...] [--io-patterns SPEC ...]
"""

import argparse
import json
import subprocess
import sys

PATTERNS = ["window:256", "causal-window:256", "window:64", "bigbird:64:2:3",
            "bigbird-block:64:3:2:3", "strided:64", "dilated:256:4", "block:64:0.1",
            "random:0.02", "powerlaw:32", "causal-varlen:{a},{b},{c},{a}",
            "window:256+global:4", "global:256"]  # the lengths: n/4, n/8, 3n/8, n/4
IO_PATTERNS = ["window:256", "bigbird:64:2:3", "random:0.02", "powerlaw:32", "strided:64"]
FIELDS = ["schedule", "variant", "tiling", "variant_plan", "output_digest", "io"]


def run(program, spec, pass_, n, threads, count_io):
    out = subprocess.run([program, "run", "--N", str(n), "--d", "64", "--pattern", spec,
                          "--pass", pass_, "--threads", str(threads), "--json"] +
                         (["--count-io"] if count_io else []),
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    if "output_digest" not in j:
        raise SystemExit(f"{program} {spec} {pass_}: no output_digest in its --json")
    # variant and variant_plan only where the variant planner ran (a fused plan)
    return {f: j.get(f) for f in FIELDS}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    p.add_argument("--patterns", nargs="*", default=PATTERNS)
    p.add_argument("--io-patterns", nargs="*", default=IO_PATTERNS)
    args = p.parse_args()
    differ = 0
    n = args.n
    specs = [s.format(a=n // 4, b=n // 8, c=n - 2 * (n // 4) - n // 8) for s in args.patterns]
    for spec in specs + [s + " (io)" for s in args.io_patterns]:
        count_io = spec.endswith(" (io)")
        spec = spec.removesuffix(" (io)")
        for pass_ in ["forward", "backward"]:
            first = None
            for t in args.threads:
                a = run(args.old, spec, pass_, args.n, t, count_io)
                b = run(args.new, spec, pass_, args.n, t, count_io)
                bad = [f for f in FIELDS if a[f] != b[f]]
                if first is not None and first["output_digest"] != b["output_digest"]:
                    bad.append(f"output_digest against threads {args.threads[0]}")
                first = first or b
                differ += 1 if bad else 0
                print(f"{spec:34} {pass_:8} threads {t}{' io' if count_io else '   '}: "
                      f"{'differ in ' + ', '.join(bad) if bad else 'identical'}"
                      f"  ({b['variant'] or b['schedule']})", flush=True)
    print(f"{differ} case(s) differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
