// Tests of the native bf16 element forward (sparse/src/kernels/element/forward_element.cpp's
// bf16 instantiation, docs/design.md section 16) through ioattn::attention with bf16 views, a
// support and the element variant. On a CPU with AVX512_BF16 it is what that variant's forward
// runs (bf16_runs_native). Its scores and P V are sums of bf16 pairs (vdpbf16ps; P rounded to
// bf16) in an order of its own, so it and the widening path (the float kernel on the widened
// operands, O rounded once) are each checked against the double reference on the same bf16
// inputs (u = 2^-8, u32 = 2^-24), as the tile forward's test derives the bound:
//   max|O - O_ref| <= (u + 2 (n_k + d) u32) max|O_ref| + u max|V|,
//   |L - L_ref| <= 2 (n_k + d) u32 (1 + |L_ref|),
// on random patterns (rows of a few keys: the short runs' kLanes-row batches; rows of many),
// power law, windows, ragged N, odd d and d_v (the pairs' masked tail), d_v = 200 (P V over
// two slices of 128 words), GQA, rows without keys (O = 0, L = -inf); bitwise equal at one
// thread and all (and to the widening path where the native kernel does not run); counted I/O
// equals the closed form and the float kernel's dry run; a non-finite V value reaches only the
// rows that see it; denormal q rows score 0.

#include "bf16_forward_checks.hpp"
#include "bf16_native.hpp"
#include "scoped_env.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/sparse/element.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace sparse_element_bf16_test {

using ioattn::AttentionOptions;
using ioattn::AttentionReport;
using ioattn::bf16;
using ioattn::MemoryModel;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Structure;
using ioattn::Tiling;
using ioattn::sparse::Support;
using ioattn::sparse::Variant;
using ioattn::test::bf16_shape;
using ioattn::test::force_widening;
using ioattn::test::widened;
using Run = ioattn::test::ForwardRun;
using Reference = ioattn::test::SparseReference;
using ioattn::test::check_accuracy;
using ioattn::test::finite_rows_without;
using ioattn::test::keyless_rows_empty;
using ioattn::test::poison_v_rows;
using ioattn::test::same_bits;

/// The fused schedule's element variant under M.
AttentionOptions element_options(std::int64_t m) {
    AttentionOptions o;
    o.schedule = Schedule::fused;
    o.variant = Variant::element;
    o.memory = MemoryModel{m};
    return o;
}

/// Rows i with i % 5 == 2 see no key, the others every 7th key from i % 7.
Support strided_with_empty_rows(std::int64_t n) {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < n; ++i) {
        if (i % 5 != 2)
            for (std::int64_t j = i % 7; j < n; j += 7)
                cols.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return Support(n, n, std::move(offsets), std::move(cols));
}

/// Runs `r` over `s` under `o`, counted, then at one thread, then widened: checks the route,
/// the counts, the accuracy of both paths and the thread-count invariance; leaves the native
/// run's O and L in `r`.
void check_case(Run& r, const Support& s, AttentionOptions o) {
    Structure<bf16> st;
    st.support = &s;
    auto a = r.args();
    o.count_io = true;
    const AttentionReport report = ioattn::attention<bf16>(a, st, o);
    REQUIRE(report.plan.variants);
    const Tiling& t = report.plan.variants->element;
    CAPTURE(t.rows, t.cols, report.plan.memory.fast_words);
    CHECK(report.plan.variants->variant == Variant::element);
    CHECK(ioattn::bf16_runs_native(report.plan, st) == ioattn::bf16_kernels_native());
    REQUIRE(report.io);
    CHECK(*report.io == *report.closed_form);
    ioattn::DryRunCounter dry(report.plan.memory.fast_words);
    ioattn::sparse::forward_element(
        ioattn::ForwardArgs<float>::shape_only(r.p), s, t, report.plan.memory, dry);
    CHECK(*report.io == dry.report());
    const Reference ref(r, s);
    check_accuracy(r, ref);
    const std::vector<bf16> o_all = r.o;
    const std::vector<float> l_all = r.lse;
    o.count_io = false;
    o.threads = 1;
    (void)ioattn::attention<bf16>(a, st, report.plan, o);
    CHECK(r.o == o_all);
    CHECK(same_bits(r.lse, l_all));
    {
        const auto env = force_widening();
        CHECK_FALSE(ioattn::bf16_runs_native(report.plan, st));
        (void)ioattn::attention<bf16>(a, st, report.plan, o);
    }
    check_accuracy(r, ref); // the float kernel on the widened operands, O rounded once
    if (!ioattn::bf16_kernels_native()) { // then both runs took the widening path
        CHECK(r.o == o_all);
        CHECK(same_bits(r.lse, l_all));
    }
    r.o = o_all; // the native kernel's outputs, for the caller's checks
    r.lse = l_all;
}

TEST_CASE("sparse bf16 native: the element variant's forward runs on this CPU",
          "[bf16][sparse][element]") {
    CHECK(ioattn::bf16_kernels_native() == ioattn::test::native_expected());
    if (!ioattn::bf16_kernels_native()) {
        WARN("the native bf16 kernels do not run here: nothing to route");
        return;
    }
    Run r(bf16_shape(300, 300, 64, 64, false), 5);
    const Support s = ioattn::sparse::parse_pattern("random:0.05", 300, 300, 3);
    Structure<bf16> st;
    st.support = &s;
    const auto plan =
        ioattn::plan_attention<bf16>(r.p, ioattn::Pass::forward, st, element_options(1 << 14));
    REQUIRE(plan.variants);
    CHECK(plan.variants->variant == Variant::element);
    CHECK(ioattn::bf16_runs_native(plan, st));
    // the backward keeps widening
    AttentionOptions back = element_options(1 << 14);
    const auto b = ioattn::plan_attention<bf16>(r.p, ioattn::Pass::backward, st, back);
    CHECK_FALSE(ioattn::bf16_runs_native(b, st));
}

TEST_CASE("sparse bf16 native element: it and the widening path agree with the double "
          "reference, exact I/O, thread-count invariant",
          "[bf16][sparse][element]") {
    struct Case {
        Problem p;
        std::string spec; // empty: strided_with_empty_rows
        std::int64_t m;
    };

    const std::vector<Case> cases = {
        {bf16_shape(333, 333, 64, 64, false), "random:0.02", 1 << 14},       // short runs, ragged
        {bf16_shape(256, 256, 64, 64, false), "random:0.3", 1 << 14},        // long runs
        {bf16_shape(200, 200, 32, 32, false, 4, 2), "random:0.05", 1 << 14}, // GQA
        {bf16_shape(129, 129, 7, 5, false), "random:0.1", 1 << 13},          // odd d, d_v
        {bf16_shape(131, 150, 9, 3, false), "powerlaw:4", 1 << 13},
        {bf16_shape(150, 170, 32, 48, false), "window:3+random:0.02", 1 << 14},
        {bf16_shape(97, 97, 16, 200, false), "random:0.1", 1 << 14},   // P V past one slice
        {bf16_shape(300, 300, 16, 16, false), "random:0.01", 1 << 10}, // narrow panels
        {bf16_shape(120, 120, 16, 16, false), "", 1 << 13},            // rows without keys
        {bf16_shape(1, 1, 1, 1, false), "dense", 1 << 13},
    };
    for (std::size_t c = 0; c < cases.size(); ++c) {
        const Case& k = cases[c];
        CAPTURE(c, k.spec);
        Run r(k.p, 60 + c);
        const Support s = k.spec.empty()
                              ? strided_with_empty_rows(k.p.n_q)
                              : ioattn::sparse::parse_pattern(k.spec, k.p.n_q, k.p.n_k, 11);
        check_case(r, s, element_options(k.m));
        if (k.spec.empty()) // O = 0 and L = -inf for the rows without keys
            CHECK(keyless_rows_empty(r));
    }
}

TEST_CASE("sparse bf16 native element: a non-finite V value reaches only the rows that see it",
          "[bf16][sparse][element]") {
    for (const char* spec : {"random:0.03", "random:0.3"}) {
        CAPTURE(spec);
        Run r(bf16_shape(200, 200, 16, 16, false), 80);
        poison_v_rows(r, 100, 50);
        const Support s = ioattn::sparse::parse_pattern(spec, 200, 200, 7);
        check_case(r, s, element_options(1 << 14));
        CHECK(finite_rows_without(r, s, 100, 50) > 0); // rows that see neither: finite
    }
}

TEST_CASE("sparse bf16 native element: denormal q rows score 0 on bf16 pairs",
          "[bf16][sparse][element]") {
    if (!ioattn::bf16_kernels_native()) {
        WARN("the native bf16 kernels do not run here: nothing to check");
        return;
    }
    // q = 127 2^-133 (the largest bf16 denormal) against K = +-2^126 of scattered signs:
    // products of about +-1, scores of a few units in fp32 (the widening path), 0 on pairs
    // (vdpbf16ps reads denormals as 0), so every row of the native run weighs its keys alike:
    // O = the mean of their V rows.
    Run r(bf16_shape(40, 40, 32, 16, false), 91);
    const std::int64_t n_k = r.p.n_k, d_v = r.p.d_v;
    for (bf16& e : r.q)
        e = bf16::from_bits(0x007F);
    for (std::size_t i = 0; i < r.k.size(); ++i)
        r.k[i] = bf16((i * 2654435761U >> 9U) % 2 == 0 ? -0x1p126F : 0x1p126F);
    const Support s = ioattn::sparse::parse_pattern("dense", n_k, n_k, 1);
    Structure<bf16> st;
    st.support = &s;
    auto a = r.args();
    const AttentionOptions o = element_options(1 << 14);
    (void)ioattn::attention<bf16>(a, st, o);
    const std::vector<bf16> native = r.o;
    {
        const auto env = force_widening();
        (void)ioattn::attention<bf16>(a, st, o);
    }
    const std::vector<double> v = ioattn::test::widened(r.v);
    double err = 0, widened_err = 0, top = 0;
    for (std::int64_t bh = 0; bh < r.p.batch * r.p.heads; ++bh) {
        const std::int64_t g = bh / r.p.heads * r.p.kv_heads + bh % r.p.heads / r.p.group();
        for (std::int64_t z = 0; z < d_v; ++z) {
            double mean = 0;
            for (std::int64_t j = 0; j < n_k; ++j)
                mean += v[static_cast<std::size_t>((g * n_k + j) * d_v + z)];
            mean /= static_cast<double>(n_k);
            top = std::max(top, std::fabs(mean));
            for (std::int64_t i = 0; i < r.p.n_q; ++i) {
                const auto at = static_cast<std::size_t>((bh * r.p.n_q + i) * d_v + z);
                const auto got = static_cast<double>(static_cast<float>(native[at]));
                const auto wide = static_cast<double>(static_cast<float>(r.o[at]));
                err = std::max(err, std::fabs(got - mean));
                widened_err = std::max(widened_err, std::fabs(wide - mean));
            }
        }
    }
    CAPTURE(err, widened_err, top);
    const double tol = 2 * ioattn::test::kU16 * top + 1e-6;
    CHECK(err <= tol);
    CHECK(widened_err > 10 * tol); // the widening path's scores are not 0: a real case
}

} // namespace sparse_element_bf16_test
