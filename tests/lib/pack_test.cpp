// Tests of ioattn/kernels/pack.hpp's transposed packing and softmax_grad.hpp's row_delta under
// every instruction-set variant built into the library that this CPU can run (the checks are
// in pack_checks.cpp, compiled once per variant). A variant the CPU cannot execute is reported
// and skipped, never run.

#include <ioattn/isa.hpp>
#include <ioattn/kernels/dispatch.hpp>

#include <catch2/catch.hpp>

#include <string>

#define IOATTN_DECLARE_CHECKS(isa)                                                                 \
    namespace pack_checks::isa {                                                                   \
    template <typename T>                                                                          \
    void transposed_rows();                                                                        \
    template <typename T>                                                                          \
    void row_delta_in_double();                                                                    \
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
        pack_checks::isa::check<TestType>();                                                       \
    }

TEMPLATE_TEST_CASE("pack_rows_transposed is the scaled transpose, its padding rows zero",
                   "[kernels][pack]",
                   float,
                   double){
#define IOATTN_RUN_PACK(isa) IOATTN_RUN(transposed_rows, isa)
    IOATTN_FOR_EACH_BUILT_ISA(IOATTN_RUN_PACK)
#undef IOATTN_RUN_PACK
}

TEMPLATE_TEST_CASE("row_delta sums dO . O in double on every tail length",
                   "[kernels][softmax_grad]",
                   float,
                   double) {
#define IOATTN_RUN_DELTA(isa) IOATTN_RUN(row_delta_in_double, isa)
    IOATTN_FOR_EACH_BUILT_ISA(IOATTN_RUN_DELTA)
#undef IOATTN_RUN_DELTA
}
