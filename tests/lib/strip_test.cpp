// Tests of ioattn/kernels/strip.hpp under every instruction-set variant built into the library
// that this CPU can run (the checks are in strip_checks.cpp, compiled once per variant). A
// variant the CPU cannot execute is reported and skipped, never run.

#include <ioattn/isa.hpp>
#include <ioattn/kernels/dispatch.hpp>

#include <catch2/catch.hpp>

#include <string>

#define IOATTN_DECLARE_CHECKS(isa)                                                                 \
    namespace strip_checks::isa {                                                                  \
    template <typename T>                                                                          \
    void tails();                                                                                  \
    template <typename T>                                                                          \
    void softmax_pieces();                                                                         \
    template <typename T>                                                                          \
    void spmm_row_in_order();                                                                      \
    }
IOATTN_FOR_EACH_BUILT_ISA(IOATTN_DECLARE_CHECKS)
#undef IOATTN_DECLARE_CHECKS

namespace {

/// Whether this CPU runs the variant in namespace `ns` ("isa_avx2", ...); warns when not.
bool runs(const std::string& ns) {
    const ioattn::Isa isa = ioattn::parse_isa(ns.substr(ns.find('_') + 1));
    if (!ioattn::cpu_supports(isa)) {
        WARN("variant " << ns << " skipped: this CPU cannot execute it");
        return false;
    }
    return true;
}

} // namespace

#define IOATTN_STRING(x) #x
#define IOATTN_RUN(check, isa)                                                                     \
    if (runs(IOATTN_STRING(isa))) {                                                                \
        INFO("variant " IOATTN_STRING(isa));                                                       \
        strip_checks::isa::check<TestType>();                                                      \
    }

TEMPLATE_TEST_CASE("strip kernels agree with scalar loops on every tail length",
                   "[kernels][strip]",
                   float,
                   double){
#define IOATTN_RUN_TAILS(isa) IOATTN_RUN(tails, isa)
    IOATTN_FOR_EACH_BUILT_ISA(IOATTN_RUN_TAILS)
#undef IOATTN_RUN_TAILS
}

TEMPLATE_TEST_CASE("strip softmax pieces: NaN ignored by the max, carried by the terms; the max "
                   "itself gives exactly 1",
                   "[kernels][strip]",
                   float,
                   double){
#define IOATTN_RUN_SOFTMAX(isa) IOATTN_RUN(softmax_pieces, isa)
    IOATTN_FOR_EACH_BUILT_ISA(IOATTN_RUN_SOFTMAX)
#undef IOATTN_RUN_SOFTMAX
}

TEMPLATE_TEST_CASE("spmm_row equals the same multiply-adds done term by term, bit for bit",
                   "[kernels][strip]",
                   float,
                   double) {
#define IOATTN_RUN_SPMM(isa) IOATTN_RUN(spmm_row_in_order, isa)
    IOATTN_FOR_EACH_BUILT_ISA(IOATTN_RUN_SPMM)
#undef IOATTN_RUN_SPMM
}
