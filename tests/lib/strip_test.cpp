// Tests of ioattn/kernels/strip.hpp under every ISA target built into the library
// that this CPU can run (the checks are in strip_checks.cpp, compiled once per ISA target). A
// variant the CPU cannot execute is reported and skipped, never run.

#include "isa_runs.hpp"

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

#define IOATTN_RUN(check, isa) IOATTN_RUN_VARIANT(strip_checks, check, isa)

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
