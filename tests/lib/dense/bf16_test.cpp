// Tests of dense::forward / backward with bf16 views (lib/src/dense/forward.cpp, backward.cpp,
// lib/src/widen.cpp; docs/design.md section 16) on the widening path (IOATTN_ISA naming the
// active target, so the native bf16 fused forward stays off): the outputs are bit for bit the float schedule
// on the widened inputs, rounded to nearest even (L: the float schedule's), for every schedule,
// with strided views and one thread or all; counted and dry-run I/O are the float schedule's
// and equal io_cost; the fp32 copies are checked against the memory limit; bad views throw.

#include "scoped_env.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/widen.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <cmath>
#include <random>
#include <vector>

namespace dense_bf16_test {

using ioattn::bf16;
using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;

/// Inputs of one problem (bf16 values, also as float) and both runs' outputs.
struct Data {
    Problem p;
    std::vector<float> q, k, v, o, lse, d_o, d_q, d_k, d_v;
    std::vector<bf16> q16, k16, v16, o16, d_o16, d_q16, d_k16, d_v16;
    std::vector<float> lse16;

    explicit Data(const Problem& problem)
        : p(problem) {
        std::mt19937_64 rng(17);
        std::uniform_real_distribution<float> u(-2.0F, 2.0F);
        const auto draw = [&](std::vector<float>& x, std::vector<bf16>& x16, std::int64_t n) {
            x.resize(static_cast<std::size_t>(n));
            x16.resize(x.size());
            for (std::size_t i = 0; i < x.size(); ++i) {
                x16[i] = bf16(u(rng));
                x[i] = static_cast<float>(x16[i]);
            }
        };
        const std::int64_t bh = p.batch * p.heads, bkv = p.batch * p.kv_heads;
        draw(q, q16, bh * p.n_q * p.d);
        draw(k, k16, bkv * p.n_k * p.d);
        draw(v, v16, bkv * p.n_k * p.d_v);
        draw(o, o16, bh * p.n_q * p.d_v);
        draw(d_o, d_o16, bh * p.n_q * p.d_v);
        draw(d_q, d_q16, bh * p.n_q * p.d);
        draw(d_k, d_k16, bkv * p.n_k * p.d);
        draw(d_v, d_v16, bkv * p.n_k * p.d_v);
        lse.assign(static_cast<std::size_t>(bh * p.n_q), 0.0F);
        lse16 = lse;
    }

    ioattn::BackwardArgs<float> args32() {
        return ioattn::BackwardArgs<float>::packed(p,
                                                   q.data(),
                                                   k.data(),
                                                   v.data(),
                                                   o.data(),
                                                   lse.data(),
                                                   d_o.data(),
                                                   d_q.data(),
                                                   d_k.data(),
                                                   d_v.data());
    }

    ioattn::BackwardArgs<bf16> args16() {
        return ioattn::BackwardArgs<bf16>::packed(p,
                                                  q16.data(),
                                                  k16.data(),
                                                  v16.data(),
                                                  o16.data(),
                                                  lse16.data(),
                                                  d_o16.data(),
                                                  d_q16.data(),
                                                  d_k16.data(),
                                                  d_v16.data());
    }
};

bool rounds_to(const std::vector<bf16>& got, const std::vector<float>& want) {
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!(got[i] == bf16(want[i])))
            return false;
    return true;
}

Problem shape(bool causal) {
    Problem p;
    p.batch = 2;
    p.heads = 4;
    p.kv_heads = 2;
    p.n_q = 70;
    p.n_k = 90;
    p.d = 16;
    p.d_v = 24;
    p.causal = causal;
    return p.resolved("test");
}

/// IOATTN_ISA naming the active target: the widening path, with the native bf16 fused forward
/// off (tested in forward_fused_bf16_test.cpp).
ioattn::test::ScopedEnv widening_path() {
    return {"IOATTN_ISA", std::string(ioattn::to_string(ioattn::active_isa()))};
}

TEST_CASE("dense bf16: each schedule is the float schedule on widened inputs, rounded",
          "[bf16][dense]") {
    const auto widening = widening_path();
    const MemoryModel m{1 << 13};
    for (const bool causal : {false, true})
        for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
            CAPTURE(causal, ioattn::to_string(s));
            Data x(shape(causal));
            const Tiling tf = Tiling::for_memory(s, m, x.p);
            const Tiling tb = Tiling::for_memory(s, m, x.p, Pass::backward);
            IoCounter c32(m.fast_words), c16(m.fast_words), b32(m.fast_words), b16(m.fast_words);
            ioattn::dense::forward(x.args32(), tf, m, c32);
            ioattn::dense::forward(x.args16(), tf, m, c16);
            CHECK(rounds_to(x.o16, x.o));
            CHECK(x.lse16 == x.lse);
            CHECK(c16.report() == c32.report());
            CHECK(c16.report() == ioattn::io_cost(x.p, tf, Pass::forward));
            if (s == Schedule::fused) { // in bytes: 2 per operand word, 4 per word of L
                const std::int64_t l_words = x.p.batch * x.p.heads * x.p.n_q;
                const std::int64_t words = ioattn::io_cost(x.p, tf, Pass::forward).total();
                CHECK(c16.words(ioattn::Operand::lse) == l_words);
                CHECK(c16.bytes(2, 4) == 2 * (words - l_words) + 4 * l_words);
                CHECK(c16.bytes(4, 4) == 4 * words);
            }
            // the backward from the bf16 forward's O (as stored) and L
            for (std::size_t i = 0; i < x.o.size(); ++i)
                x.o[i] = static_cast<float>(x.o16[i]);
            ioattn::dense::backward(x.args32(), tb, m, b32);
            ioattn::dense::backward(x.args16(), tb, m, b16);
            CHECK(rounds_to(x.d_q16, x.d_q));
            CHECK(rounds_to(x.d_k16, x.d_k));
            CHECK(rounds_to(x.d_v16, x.d_v));
            CHECK(b16.report() == ioattn::io_cost(x.p, tb, Pass::backward));
            // one thread: the same bits
            const auto o_all = x.o16;
            const auto dq_all = x.d_q16, dk_all = x.d_k16;
            {
                tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
                NullCounter n;
                ioattn::dense::forward(x.args16(), tf, m, n);
                CHECK(x.o16 == o_all);
                ioattn::dense::backward(x.args16(), tb, m, n);
                CHECK(x.d_q16 == dq_all);
                CHECK(x.d_k16 == dk_all);
            }
        }
}

TEST_CASE("dense bf16: the reference schedule, the convenience call and the dry run",
          "[bf16][dense]") {
    Data x(shape(true));
    NullCounter n;
    ioattn::dense::forward(x.args32(), Tiling{Schedule::reference, 1, 1}, MemoryModel{1}, n);
    const Tiling used =
        ioattn::dense::forward(ioattn::ForwardArgs<bf16>(x.args16()), Schedule::reference);
    CHECK(used.schedule == Schedule::reference);
    CHECK(rounds_to(x.o16, x.o));
    CHECK(x.lse16 == x.lse);
    const MemoryModel m{1 << 12};
    const Tiling t = Tiling::for_memory(Schedule::fused, m, x.p);
    ioattn::DryRunCounter dry(m.fast_words);
    ioattn::dense::forward(ioattn::ForwardArgs<bf16>::shape_only(x.p), t, m, dry);
    CHECK(dry.report() == ioattn::dense::dry_run_forward(x.p, t, m));
}

TEST_CASE("dense bf16: fp32 copies are checked against the memory limit; bad views throw",
          "[bf16][dense]") {
    const auto widening = widening_path();
    Data x(shape(false));
    const MemoryModel m{1 << 13};
    const Tiling t = Tiling::for_memory(Schedule::fused, m, x.p);
    NullCounter n;
    {
        const ioattn::test::ScopedEnv limit("IOATTN_MAX_BYTES", "4k");
        CHECK_THROWS_WITH(ioattn::dense::forward(x.args16(), t, m, n),
                          Catch::Contains("fp32 copies"));
    }
    CHECK(ioattn::WidenedForward::bytes(x.p) ==
          4 * (x.q.size() + x.k.size() + x.v.size() + x.o.size()));
    CHECK(ioattn::WidenedBackward::bytes(x.p) ==
          8 * (x.q.size() + x.k.size() + x.v.size() + x.o.size()));
    auto a = x.args16();
    a.o.data = a.d_q.data; // o over d_q
    CHECK_THROWS_AS(ioattn::dense::backward(a, t, m, n), ioattn::InvalidArgument);
    auto b = x.args16();
    b.lse.rows = 3;
    CHECK_THROWS_WITH(ioattn::dense::forward(ioattn::ForwardArgs<bf16>(b), t, m, n),
                      Catch::Contains("ioattn::dense::forward") && Catch::Contains("lse"));
}

} // namespace dense_bf16_test
