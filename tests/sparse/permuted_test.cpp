// Tests of the permuted variant (sparse/src/plan/permuted.cpp) reading and writing the reordered
// problem in place: when tiles take every pair, no copy is written (forward: only O and L;
// backward: nothing writes Q, K, V, O, dO or L), answers match the reference, counted I/O equals
// the plan's closed form and the dry run, and a NaN V row reaches only the rows that see it.

#include "kernel_case.hpp"

#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::sparse::Support;
using ioattn::sparse::Variant;
using ioattn::sparse::test::Case;
using ioattn::sparse::test::kAmple;
using ioattn::sparse::test::max_error;
using ioattn::sparse::test::reference_of;

namespace {

namespace sp = ioattn::sparse;

} // namespace

TEST_CASE("the permuted forward reads a reordered problem in place when tiles take every pair",
          "[sparse][variants][io]") {
    // dilated:4:3 reorders rows and keys by residue into bands: every pair through tiles
    const Problem p = sp::test::kernel_shape(2, 40, 40, 8);
    const Support s = sp::parse_pattern("dilated:4:3", 40, 40, 5);
    const auto plan = sp::plan_variants<float>(p, s, kAmple, Pass::forward, Variant::permuted);
    REQUIRE(plan.variant == Variant::permuted);
    REQUIRE(plan.rows_reordered);
    REQUIRE(plan.keys_reordered);
    REQUIRE(plan.element_pairs == 0);
    Case<float> c(p, 3);
    IoCounter io(kAmple.fast_words);
    sp::forward(c.forward(), s, plan, kAmple, io);
    CHECK(max_error(c.o, reference_of(p, c, s).o) < 2e-6);
    const Problem r = p.resolved();
    // no copy in or out: the only words written are O and L
    CHECK(io.report().writes == r.batch_heads() * r.n_q * (r.d_v + 1));
    CHECK(io.report() == sp::io_cost<float>(p, s, plan));
    ioattn::DryRunCounter dry(kAmple.fast_words);
    sp::forward(ioattn::ForwardArgs<float>::shape_only(p), s, plan, kAmple, dry);
    CHECK(dry.report() == io.report());
    // a NaN in key 5's V row, column 0 (every slice): column 0 of the rows that see key 5 is
    // NaN, the rest the reference's finite answer (the chunks are then gathered, keys through
    // the order)
    const Problem& cp = c.p;
    for (std::int64_t kv = 0; kv < cp.batch * cp.kv_heads; ++kv)
        c.v[static_cast<std::size_t>((kv * cp.n_k + 5) * cp.d_v)] =
            std::numeric_limits<float>::quiet_NaN();
    NullCounter none;
    sp::forward(c.forward(), s, plan, kAmple, none);
    const Case<double> ref = reference_of(p, c, s);
    for (std::size_t e = 0; e < c.o.size(); ++e) {
        const std::int64_t row = static_cast<std::int64_t>(e) / cp.d_v % cp.n_q;
        CAPTURE(e, row);
        CHECK(std::isnan(ref.o[e]) ==
              (s.contains(row, 5) && static_cast<std::int64_t>(e) % cp.d_v == 0));
        if (std::isnan(ref.o[e]))
            CHECK(std::isnan(c.o[e]));
        else
            CHECK(std::fabs(static_cast<double>(c.o[e]) - ref.o[e]) < 2e-6);
    }
}

TEST_CASE("the permuted backward reads and writes a reordered problem in place when tiles take "
          "every pair",
          "[sparse][variants][io][backward]") {
    // dilated reorders rows and keys, strided (at 96) its keys alone
    for (const auto& [spec, n] : std::vector<std::pair<std::string, std::int64_t>>{
             {"dilated:4:3", 40}, {"strided:4", 96}}) {
        CAPTURE(spec, n);
        const Problem p = sp::test::kernel_shape(2, n, n, 8);
        const Support s = sp::parse_pattern(spec, n, n, 5);
        // at the tuned tile height (another height may leave pairs to the element kernel)
        const auto plan = sp::plan_variants<float>(
            p,
            s,
            kAmple,
            Pass::backward,
            Variant::permuted,
            sp::tuned_tiling(ioattn::Schedule::fused, kAmple, p, Pass::backward));
        REQUIRE(plan.variant == Variant::permuted);
        REQUIRE(plan.keys_reordered);
        REQUIRE(plan.element_pairs == 0);
        sp::test::check_backward_agrees<float>(p, s, 8, [&](Case<float>& c, const Support& t) {
            IoCounter io(kAmple.fast_words, true);
            sp::backward(c.backward(), t, plan, kAmple, io);
            CHECK(io.report() == sp::io_cost<float>(p, t, plan));
            // no copy: nothing writes Q, K, V, O, dO or L (a copy into a reordered buffer would)
            for (const ioattn::TraceEvent& e : io.trace())
                if (e.kind == ioattn::TraceEvent::Kind::write)
                    for (const ioattn::Operand op : {ioattn::Operand::q,
                                                     ioattn::Operand::k,
                                                     ioattn::Operand::v,
                                                     ioattn::Operand::o,
                                                     ioattn::Operand::d_o,
                                                     ioattn::Operand::lse})
                        CHECK(e.block.operand != op);
            ioattn::DryRunCounter dry(kAmple.fast_words);
            sp::backward(ioattn::BackwardArgs<float>::shape_only(p), t, plan, kAmple, dry);
            CHECK(dry.report() == io.report());
        });
    }
}
