// Tests of the native bf16 sparse tile forward (sparse/src/kernels/tile/forward_fused_bf16.cpp,
// docs/design.md section 16) through ioattn::attention with bf16 views and a support. On a CPU
// with AVX512_BF16 it is what the tile variant's forward runs (bf16_runs_native), and its
// results differ from the widening path's. Against the double reference on the same bf16
// inputs (u = 2^-8, u32 = 2^-24):
//   max|O - O_ref| <= (u + 2 (n_k + d) u32) max|O_ref| + u max|V|,
//   |L - L_ref| <= 2 (n_k + d) u32 (1 + |L_ref|),
// on windows, causal windows, bigbird (gathered chunks), block patterns, window + random,
// ragged N, odd d and d_v, GQA, tall blocks (several lane slabs), no variant plan, rows without
// keys (O = 0, L = -inf); bitwise equal at one thread and all; counted I/O equals the closed
// form and the float kernel's dry run; a non-finite V value reaches only the rows that see it.

#include "bf16_forward_checks.hpp"
#include "bf16_native.hpp"
#include "scoped_env.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace sparse_bf16_native_test {

using ioattn::AttentionOptions;
using ioattn::bf16;
using ioattn::MemoryModel;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Structure;
using ioattn::sparse::Support;
using ioattn::sparse::Variant;
using ioattn::test::bf16_shape;
using ioattn::test::force_widening;
using ioattn::test::native_expected;
using ioattn::test::widened;
using Run = ioattn::test::ForwardRun;
using Reference = ioattn::test::SparseReference;
using ioattn::test::check_accuracy;
using ioattn::test::finite_rows_without;
using ioattn::test::keyless_rows_empty;
using ioattn::test::poison_v_rows;
using ioattn::test::same_bits;

/// The fused schedule's tile variant under M (as the planner tiles it, or for_memory's
/// tallest blocks), or the fused kernel without a variant plan.
AttentionOptions tile_options(std::int64_t m, bool tuned = true, bool dispatch = true) {
    AttentionOptions o;
    o.schedule = Schedule::fused;
    if (dispatch)
        o.variant = Variant::tile;
    o.dispatch = dispatch;
    o.tuned = tuned;
    o.memory = MemoryModel{m};
    return o;
}

/// Rows i with i % 5 == 2 see no key, the others a window of 2 w + 1 keys.
Support window_with_empty_rows(std::int64_t n, std::int64_t w) {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < n; ++i) {
        if (i % 5 != 2)
            for (std::int64_t j = std::max<std::int64_t>(0, i - w); j <= std::min(n - 1, i + w);
                 ++j)
                cols.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return Support(n, n, std::move(offsets), std::move(cols));
}

/// Runs `r` over `s` under `o`, counted, then at one thread: checks the route, the counts,
/// the accuracy and the thread-count invariance.
void check_case(Run& r, const Support& s, AttentionOptions o) {
    Structure<bf16> st;
    st.support = &s;
    auto a = r.args();
    o.count_io = true;
    const ioattn::AttentionReport report = ioattn::attention<bf16>(a, st, o);
    CAPTURE(report.plan.tiling.rows, report.plan.tiling.cols, report.plan.memory.fast_words);
    CHECK(ioattn::bf16_runs_native(report.plan, st) == ioattn::bf16_kernels_native());
    REQUIRE(report.io);
    CHECK(*report.io == *report.closed_form);
    CHECK(*report.io ==
          ioattn::sparse::dry_run_forward(r.p, s, report.plan.tiling, report.plan.memory));
    check_accuracy(r, Reference(r, s));
    const std::vector<bf16> o_all = r.o;
    const std::vector<float> l_all = r.lse;
    o.count_io = false;
    o.threads = 1;
    (void)ioattn::attention<bf16>(a, st, report.plan, o);
    CHECK(r.o == o_all);
    CHECK(same_bits(r.lse, l_all));
}

TEST_CASE("sparse bf16 native: the tile forward runs on this CPU and differs from widening",
          "[bf16][sparse]") {
    CHECK(ioattn::bf16_kernels_native() == native_expected());
    if (!ioattn::bf16_kernels_native()) {
        WARN("the native bf16 kernels do not run here: nothing to compare");
        return;
    }
    Run r(bf16_shape(333, 333, 64, 64, false), 3);
    const Support s = ioattn::sparse::parse_pattern("window:40", 333, 333, 1);
    const Reference ref(r, s);
    Structure<bf16> st;
    st.support = &s;
    auto a = r.args();
    const auto report = ioattn::attention<bf16>(a, st, tile_options(1 << 14));
    REQUIRE(report.plan.variants);
    CHECK(report.plan.variants->variant == Variant::tile);
    CHECK(ioattn::bf16_runs_native(report.plan, st));
    check_accuracy(r, ref);
    const std::vector<bf16> o_native = r.o;
    {
        const auto env = force_widening();
        CHECK_FALSE(ioattn::bf16_runs_native(report.plan, st));
        (void)ioattn::attention<bf16>(a, st, tile_options(1 << 14));
    }
    check_accuracy(r, ref);       // the widening path, within the same tolerance
    CHECK_FALSE(o_native == r.o); // P rounded to bf16: some element differs
    // the backward keeps widening (the element variant's forward is native too:
    // forward_element_bf16_test.cpp)
    const auto back = ioattn::plan_attention<bf16>(r.p, ioattn::Pass::backward, st, {});
    CHECK_FALSE(ioattn::bf16_runs_native(back, st));
}

TEST_CASE("sparse bf16 native: agrees with the double reference, exact I/O, thread-count "
          "invariant",
          "[bf16][sparse]") {
    struct Case {
        Problem p;
        std::string spec; // empty: window_with_empty_rows
        AttentionOptions o;
    };

    const std::vector<Case> cases = {
        {bf16_shape(333, 333, 64, 64, false), "window:16", tile_options(1 << 14)}, // GQA, ragged
        {bf16_shape(200, 200, 32, 32, false, 4, 2), "causal-window:24", tile_options(1 << 14)},
        {bf16_shape(300, 300, 16, 16, false), "bigbird:8:2:3", tile_options(1 << 14)},
        {bf16_shape(256, 256, 64, 64, false), "block:16:0.3", tile_options(1 << 15)},
        {bf16_shape(150, 170, 32, 48, false), "window:8+random:0.05", tile_options(1 << 14)},
        {bf16_shape(129, 129, 7, 5, false), "window:12", tile_options(1 << 13)}, // odd d, d_v
        {bf16_shape(131, 131, 9, 3, false), "bigbird:4:1:2", tile_options(1 << 13)},
        {bf16_shape(400, 400, 16, 16, false), "window:40", tile_options(1 << 17, false)}, // slabs
        {bf16_shape(300, 300, 32, 32, false), "window:20", tile_options(1 << 14, true, false)},
        {bf16_shape(120, 120, 16, 16, false), "", tile_options(1 << 13)}, // rows without keys
        {bf16_shape(70, 90, 16, 24, false, 4, 2), "dense", tile_options(1 << 13)},
        {bf16_shape(1, 1, 1, 1, false), "dense", tile_options(1 << 13)},
    };
    for (std::size_t c = 0; c < cases.size(); ++c) {
        const Case& k = cases[c];
        CAPTURE(c, k.spec);
        Run r(k.p, 20 + c);
        const Support s = k.spec.empty()
                              ? window_with_empty_rows(k.p.n_q, 6)
                              : ioattn::sparse::parse_pattern(k.spec, k.p.n_q, k.p.n_k, 7);
        check_case(r, s, k.o);
        if (k.spec.empty()) // O = 0 and L = -inf for the rows without keys
            CHECK(keyless_rows_empty(r));
    }
}

TEST_CASE("sparse bf16 native: a non-finite V value reaches only the rows that see it",
          "[bf16][sparse]") {
    for (const char* spec : {"window:8", "bigbird:6:1:3"}) {
        CAPTURE(spec);
        Run r(bf16_shape(200, 200, 16, 16, false), 40);
        poison_v_rows(r, 100, 50);
        const Support s = ioattn::sparse::parse_pattern(spec, 200, 200, 7);
        check_case(r, s, tile_options(1 << 14));
        CHECK(finite_rows_without(r, s, 100, 50) > 0); // rows that see neither: finite
    }
    // d_v = 256: the kernel checks V's slice in ranges of 2^16 / d_v = 256 rows
    // (kernels/tile/forward_setup.hpp), the values set here lie in the second and third
    Run r(bf16_shape(600, 600, 16, 256, false), 41);
    poison_v_rows(r, 550, 300);
    const Support s = ioattn::sparse::parse_pattern("window:8", 600, 600, 7);
    check_case(r, s, tile_options(1 << 16));
    CHECK(finite_rows_without(r, s, 550, 300) > 0);
}

} // namespace sparse_bf16_native_test
