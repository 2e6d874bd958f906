#!/usr/bin/env bash
# Prints one line per run: the `ioattn run` arguments and the digest of the run's outputs
# (O and L forward, dQ, dK, dV backward; "output_digest" of --json). Two builds compute bitwise
# the same results when their lists are equal:
#   tests/tools/output_digests.sh build/a/apps/ioattn > a.txt
#   tests/tools/output_digests.sh build/b/apps/ioattn > b.txt && diff a.txt b.txt
# Covers dense and sparse, forward and backward, both schedules, every variant of the sparse
# fused schedule, sparse inputs, GQA and causal, float and double, on 1 and 2 threads.
set -euo pipefail
ioattn=${1:?usage: output_digests.sh PATH/TO/ioattn}

runs=()
for dtype in float double; do
  for pass in forward backward; do
    for schedule in fused materialized; do
      runs+=("--N 300 --d 32 --heads 2 --schedule $schedule --pass $pass --dtype $dtype")
      runs+=("--n-q 200 --n-k 333 --d 48 --heads 4 --kv-heads 2 --causal --schedule $schedule --pass $pass --dtype $dtype")
      for pattern in window:16 causal-window:24 bigbird:16:2:3 random:0.05 strided:16 \
                     dilated:32:4 global:3+window:8 block:16:0.2; do
        runs+=("--N 384 --d 32 --pattern $pattern --schedule $schedule --pass $pass --dtype $dtype")
      done
      runs+=("--N 256 --d 32 --pattern bigbird:16:2:3 --input-density 0.5 --schedule $schedule --pass $pass --dtype $dtype")
    done
    for variant in tile element split permuted; do
      for pattern in random:0.03 strided:16 global:2+window:8; do
        runs+=("--N 384 --d 32 --pattern $pattern --variant $variant --pass $pass --dtype $dtype")
      done
    done
    runs+=("--N 512 --d 64 --M 2048 --pass $pass --dtype $dtype")
  done
done

for args in "${runs[@]}"; do
  for threads in 1 2; do
    # shellcheck disable=SC2086
    digest=$("$ioattn" run $args --threads $threads --json |
             sed -n 's/.*"output_digest": *"\([0-9a-f]*\)".*/\1/p')
    [[ -n "$digest" ]] || { echo "output_digests: no digest from: run $args" >&2; exit 1; }
    echo "$args --threads $threads  $digest"
  done
done
