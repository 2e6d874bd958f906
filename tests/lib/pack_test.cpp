// Tests of ioattn/kernels/pack.hpp's transposed packing and softmax_grad.hpp's row_delta under
// every ISA target built into the library that this CPU can run (the checks are
// in pack_checks.cpp, compiled once per ISA target). A target the CPU cannot execute is reported
// and skipped, never run.

#include "isa_runs.hpp"

#define IOATTN_DECLARE_CHECKS(isa)                                                                 \
    namespace pack_checks::isa {                                                                   \
    template <typename T>                                                                          \
    void transposed_rows();                                                                        \
    template <typename T>                                                                          \
    void row_delta_in_double();                                                                    \
    }
IOATTN_FOR_EACH_BUILT_ISA(IOATTN_DECLARE_CHECKS)
#undef IOATTN_DECLARE_CHECKS

#define IOATTN_RUN(check, isa) IOATTN_RUN_VARIANT(pack_checks, check, isa)

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
