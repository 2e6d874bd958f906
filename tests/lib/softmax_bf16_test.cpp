// Tests of ioattn/kernels/softmax_bf16.hpp, the online softmax of the native bf16 forwards
// (docs/design.md section 16), on a CPU with AVX512_BF16 (the checks are in
// softmax_bf16_checks.cpp, compiled for the avx512bf16 region): exp2_p6 within 2^-23 of
// 2^x on [-126, 0] and exact at 0, -inf and NaN; softmax_pairs leaves the m, alpha, l and
// bf16 pairs of P that online_softmax_block and pack_p leave (P within one bf16 place, l
// within 4e-7), +inf and NaN scores and fully masked lanes included. Elsewhere the test says
// it cannot run.

#include <ioattn/isa.hpp>

#include <catch2/catch.hpp>

#if defined(IOATTN_BUILT_AVX512BF16)
namespace softmax_bf16_checks::isa_avx512bf16 {
void exp2_within_two_roundings();
void pairs_as_block_then_pack();
} // namespace softmax_bf16_checks::isa_avx512bf16
#endif

namespace {

bool runs_here() {
#if defined(IOATTN_BUILT_AVX512BF16)
    if (ioattn::cpu_supports_avx512_bf16())
        return true;
    WARN("this CPU lacks AVX512_BF16: the native bf16 softmax is not run");
#else
    WARN("the library was built without the avx512bf16 region");
#endif
    return false;
}

} // namespace

TEST_CASE("exp2_p6 is within two fp32 roundings of 2^x", "[kernels][bf16]") {
#if defined(IOATTN_BUILT_AVX512BF16)
    if (runs_here())
        softmax_bf16_checks::isa_avx512bf16::exp2_within_two_roundings();
#else
    runs_here();
#endif
}

TEST_CASE("softmax_pairs leaves what online_softmax_block and pack_p leave", "[kernels][bf16]") {
#if defined(IOATTN_BUILT_AVX512BF16)
    if (runs_here())
        softmax_bf16_checks::isa_avx512bf16::pairs_as_block_then_pack();
#else
    runs_here();
#endif
}
