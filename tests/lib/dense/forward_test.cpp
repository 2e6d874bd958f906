// Tests of the dense forward dispatchers ioattn::dense::forward (ioattn/dense/forward.hpp).

#include "forward_suite.hpp"

#include <ioattn/dense.hpp>

#include <catch2/catch.hpp>

#include <cstring>

using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
namespace t = ioattn::test;

namespace {

Problem problem() {
    Problem p;
    p.batch = 2;
    p.heads = 2;
    p.kv_heads = 1;
    p.n_q = 45;
    p.n_k = 61;
    p.d = 16;
    p.d_v = 12;
    p.causal = true;
    return p;
}

} // namespace

TEMPLATE_TEST_CASE("forward(args, tiling, memory, counter) runs the named kernel",
                   "[dense][forward]",
                   float,
                   double) {
    const Problem p = problem();
    for (const Tiling& tiling : {Tiling{Schedule::reference, 1, 1},
                                 Tiling{Schedule::fused, 7, 9},
                                 Tiling{Schedule::materialized, 6, 6}}) {
        CAPTURE(tiling);
        t::AttentionCase<TestType> direct(p, 3);
        t::AttentionCase<TestType> routed(p, 3);
        const MemoryModel memory{tiling.schedule == Schedule::reference
                                     ? std::int64_t{1} << 30
                                     : tiling.resident_words(direct.problem)};
        IoCounter a(memory.fast_words);
        IoCounter b(memory.fast_words);
        t::run_kernel<TestType, IoCounter>(direct.args(), tiling, memory, a);
        ioattn::dense::forward<TestType, IoCounter>(routed.args(), tiling, memory, b);
        CHECK(std::memcmp(direct.o.data.data(),
                          routed.o.data.data(),
                          direct.o.data.size() * sizeof(TestType)) == 0);
        CHECK(std::memcmp(direct.lse.data.data(),
                          routed.lse.data.data(),
                          direct.lse.data.size() * sizeof(TestType)) == 0);
        CHECK(a.report() == b.report());
        t::check_outputs(routed);
    }
}

TEMPLATE_TEST_CASE("forward(args, schedule, memory) uses the tuned tiling",
                   "[dense][forward]",
                   float,
                   double) {
    const Problem p = problem();
    for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
        for (const std::int64_t m : {std::int64_t{3000}, std::int64_t{1} << 18}) {
            CAPTURE(ioattn::to_string(s), m);
            t::AttentionCase<TestType> c(p, 4);
            const Tiling used = ioattn::dense::forward<TestType>(c.args(), s, MemoryModel{m});
            CHECK(used == Tiling::tuned(s, MemoryModel{m}, c.problem));
            CHECK(used.resident_words(c.problem) <= m);
            t::check_outputs(c);
        }
    }
    t::AttentionCase<TestType> c(p, 5);
    const Tiling used = ioattn::dense::forward<TestType>(c.args(), Schedule::fused);
    CHECK(used.schedule == Schedule::fused);
    t::check_outputs(c);
    t::AttentionCase<TestType> r(p, 6);
    ioattn::dense::forward<TestType>(r.args(), Schedule::reference);
    t::check_outputs(r);
}

TEMPLATE_TEST_CASE("forward dispatchers validate", "[dense][forward][throws]", float, double) {
    Problem p = problem();
    t::AttentionCase<TestType> c(p, 7);
    ioattn::ForwardArgs<TestType> a = c.args();
    a.problem.n_k = 0;
    NullCounter counter;
    CHECK_THROWS_AS((ioattn::dense::forward<TestType, NullCounter>(
                        a, Tiling{Schedule::fused, 4, 4}, MemoryModel{1 << 20}, counter)),
                    ioattn::InvalidArgument);
    CHECK_THROWS_AS(ioattn::dense::forward<TestType>(a, Schedule::fused, MemoryModel{1 << 20}),
                    ioattn::InvalidArgument);
    // M below the smallest fused tiling
    CHECK_THROWS_AS(ioattn::dense::forward<TestType>(c.args(), Schedule::fused, MemoryModel{10}),
                    ioattn::CapacityError);
}

TEST_CASE("dry_run_forward counts large shapes without data", "[dense][forward][io]") {
    Problem p;
    p.batch = 1;
    p.heads = 2;
    p.n_q = 3000;
    p.n_k = 2500;
    p.d = 64;
    for (const bool causal : {false, true}) {
        p.causal = causal;
        for (const std::int64_t m : {std::int64_t{3072}, std::int64_t{1} << 16}) {
            for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
                const MemoryModel memory{m};
                const Tiling tiling = Tiling::for_memory(s, memory, p);
                CAPTURE(causal, m, tiling);
                CHECK(ioattn::dense::dry_run_forward(p, tiling, memory) ==
                      ioattn::io_cost_forward(p, tiling));
            }
        }
    }
    Problem bad = p;
    bad.d = 0;
    CHECK_THROWS_AS(
        ioattn::dense::dry_run_forward(bad, Tiling{Schedule::fused, 4, 4}, MemoryModel{1 << 20}),
        ioattn::InvalidArgument);
    CHECK_THROWS_AS(ioattn::dense::dry_run_forward(
                        p, Tiling{Schedule::materialized, 4, 5}, MemoryModel{1 << 20}),
                    ioattn::InvalidArgument);
}
