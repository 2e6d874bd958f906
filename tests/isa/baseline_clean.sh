#!/usr/bin/env bash
# Checks that no vector instruction of the AVX2 or AVX-512 variants leaked into code that the
# baseline variant runs (lib/include/ioattn/kernels/target.hpp): every function of the linked
# binary $1 whose name is not inside an isa_avx2 or isa_avx512 namespace must be plain x86-64
# (no VEX/EVEX instruction, no opmask register, no BMI/LZCNT/POPCNT). Such a leak is an
# inline function or template compiled inside a target region under a name the baseline
# shares, which the linker may keep for every caller: an illegal instruction on older CPUs and
# under valgrind. Prints the offending functions and fails.
set -euo pipefail
binary=$1
objdump -d --no-show-raw-insn -C "$binary" | awk '
/^[0-9a-f]+ <.*>:$/ { fn = $0; variant = (fn ~ /isa_avx512|isa_avx2|\[clone \.arch_/); next }
!variant && $2 ~ /^(v[a-z0-9]+|kmov[bwdq]|kor[bwdq]|kand[bwdq]|shlx|shrx|sarx|rorx|andn|bzhi|pdep|pext|mulx|lzcnt|popcnt)$/ {
    if (!(fn in bad)) { bad[fn] = $2; n++ }
}
END {
    for (f in bad) print "vector instruction " bad[f] " in baseline code: " f
    if (n > 0) { print n " function(s) outside the variants use variant instructions"; exit 1 }
    print "baseline code clean"
}'
