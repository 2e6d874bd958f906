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

#define IOATTN_BF16_CHECK(name) softmax_bf16_checks::isa_avx512bf16::name
#else
#define IOATTN_BF16_CHECK(name) nullptr
#endif

namespace {

/// Runs `check` where the library holds the avx512bf16 region and this CPU has AVX512_BF16;
/// says which is missing otherwise.
void run_native(void (*check)()) {
    if (check == nullptr)
        WARN("the library was built without the avx512bf16 region");
    else if (!ioattn::cpu_supports_avx512_bf16())
        WARN("this CPU lacks AVX512_BF16: the native bf16 softmax is not run");
    else
        check();
}

} // namespace

TEST_CASE("exp2_p6 is within two fp32 roundings of 2^x", "[kernels][bf16]") {
    run_native(IOATTN_BF16_CHECK(exp2_within_two_roundings));
}

TEST_CASE("softmax_pairs leaves what online_softmax_block and pack_p leave", "[kernels][bf16]") {
    run_native(IOATTN_BF16_CHECK(pairs_as_block_then_pack));
}
