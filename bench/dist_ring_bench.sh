#!/usr/bin/env bash
# dist_ring_bench: the ring over MPI against one process on the same machine (a benchmark, never
# a test). `mpiexec -n 2 ioattn run --dist ring|zigzag --threads 1` against `ioattn run --threads 2`,
# N = 16384, d = 64, H = 8, fp32, fused kernel, forward and backward, dense and causal (zigzag
# shards for causal). Each configuration runs `rounds` times alternating the two (each run the
# median of `repeat`), and the faster median of each side is kept. Prints the throughput ratio
# (distributed / single process; the target is >= 0.85) and the measured share of the
# communication not hidden under compute (time blocked in MPI waits over the same messages'
# time with no compute).
#
# Usage: bench/dist_ring_bench.sh [build-dir (build/release)] [repeat (3)] [rounds (2)]
# Open MPI as root or in a container needs its settings in the environment, e.g.
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
#   OMPI_MCA_btl_vader_single_copy_mechanism=none bench/dist_ring_bench.sh
set -euo pipefail
build=${1:-build/release}
repeat=${2:-3}
rounds=${3:-2}
ioattn="$build/apps/ioattn"
mpiexec=${IOATTN_MPIEXEC:-mpiexec}
python=/usr/bin/python3
shape=(--N 16384 --d 64 --heads 8 --schedule fused --repeat "$repeat" --json)

field() { # field JSON-FILE KEY.SUB...
    "$python" -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-9s %-7s %-7s %10s %10s %10s %8s %12s %12s\n' pass mask dist "single s" "dist s" \
    "1p GFLOP/s" ratio "not hidden" "time waiting"
for pass in forward backward; do
    for mask in dense causal; do
        extra=(); dist=ring
        if [ "$mask" = causal ]; then extra=(--causal); dist=zigzag; fi
        best_one=""; best_two=""
        for ((r = 0; r < rounds; ++r)); do
            "$ioattn" run "${shape[@]}" "${extra[@]}" --pass "$pass" --threads 2 > "$tmp/one.json"
            "$mpiexec" -n 2 "$ioattn" run --dist "$dist" "${shape[@]}" "${extra[@]}" --pass "$pass" \
                --threads 1 > "$tmp/two.json"
            s1=$(field "$tmp/one.json" seconds)
            s2=$(field "$tmp/two.json" seconds)
            if [ -z "$best_one" ] || "$python" -c "import sys; sys.exit(not $s1 < $best_one)"; then
                best_one=$s1; cp "$tmp/one.json" "$tmp/best_one.json"; fi
            if [ -z "$best_two" ] || "$python" -c "import sys; sys.exit(not $s2 < $best_two)"; then
                best_two=$s2; cp "$tmp/two.json" "$tmp/best_two.json"; fi
        done
        "$python" - "$tmp/best_one.json" "$tmp/best_two.json" "$pass" "$mask" "$dist" <<'PY'
import json, sys
one, two = (json.load(open(f)) for f in sys.argv[1:3])
c = two["comm"]
print(f"{sys.argv[3]:<9} {sys.argv[4]:<7} {sys.argv[5]:<7} {one['seconds']:10.3f} "
      f"{two['seconds']:10.3f} {one['gflops']:10.1f} {one['seconds'] / two['seconds']:8.3f} "
      f"{100 * c['share_not_hidden']:11.1f}% {100 * c['share_of_time_waiting']:11.2f}%")
PY
    done
done
