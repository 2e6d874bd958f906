#!/usr/bin/env bash
# Runs every libFuzzer target of the fuzz preset for a bounded time (default 60 s each) on a
# scratch copy of its seed corpus, tests/fuzz/corpus/<target>, whose files (seeds and the
# regression inputs of fixed findings) are replayed first. Fails on any crash, leak, timeout,
# out-of-memory or sanitizer report, and keeps the offending input in <build>/fuzz-findings/.
# Prints one line per target: executions and findings.
# Usage: tests/fuzz/run.sh [seconds per target] [build dir]   (after cmake --workflow --preset fuzz)
# FUZZ_TARGETS="a b" runs only those targets; FUZZ_JOBS (default: the number of cores) of them
# run at once, each on one core (a target's time and inputs do not depend on its neighbours).
set -euo pipefail
seconds=${1:-60}
build=${2:-build/fuzz}
root=$(cd "$(dirname "$0")/../.." && pwd)
findings="$build/fuzz-findings"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$findings"
status=0
targets=${FUZZ_TARGETS:-matrix_market_fuzz parse_pattern_fuzz support_fuzz sparse_rows_fuzz \
program_args_fuzz}
fuzz_one() { # fuzz_one TARGET: runs it, prints its line, returns 1 on a finding
  local target=$1
  local exe="$build/tests/fuzz/$target"
  mkdir -p "$work/$target"
  local log="$work/$target.log"
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "$exe" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$findings/$target-" "$work/$target" "$root/tests/fuzz/corpus/$target" \
       > "$log" 2>&1; then
    local execs corpus
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    corpus=$(find "$work/$target" -type f | wc -l)
    echo "fuzz: $target: ${execs:-?} executions in $seconds s, $corpus new corpus inputs, 0 findings"
  else
    echo "fuzz: $target: FINDING (input kept in $findings); end of its log:"
    tail -n 40 "$log"
    return 1
  fi
}

parallel=${FUZZ_JOBS:-$(nproc)}
for target in $targets; do
  while (( $(jobs -rp | wc -l) >= parallel )); do wait -n || true; done
  { rc=0; fuzz_one "$target" > "$work/$target.out" || rc=$?; echo "$rc" > "$work/$target.rc"; } &
done
wait
for target in $targets; do
  cat "$work/$target.out"
  [[ "$(cat "$work/$target.rc")" == 0 ]] || status=1
done
exit $status
