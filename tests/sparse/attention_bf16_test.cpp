// Tests of the bf16 entry (sparse/src/entry/attention_bf16.cpp, docs/design.md section 16):
// on the widening path (IOATTN_ISA naming the active target: the native bf16 kernels off),
// every schedule and variant, dense and sparse supports, dense and sparse operands, forward
// and backward, gives bit for bit the float run on the widened inputs with its outputs rounded
// to bf16 (L the float run's), whatever options.threads; counted I/O is the float plan's; the
// adversarial inputs (NaN, Inf, huge and tiny scores, empty rows) behave as in float; and on
// randn inputs at N = 4096 the error against the double reference on the same bf16-rounded
// inputs is within the derived tolerance: max|O - O_ref| <= (2^-8 + 2 (n_k + d) 2^-24)
// max|O_ref|, relative Frobenius error of dQ, dK, dV <= 2.5 * 2^-8.

#include "adversarial.hpp"
#include "scoped_env.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace bf16_entry_test {

using ioattn::AttentionOptions;
using ioattn::bf16;
using ioattn::MemoryModel;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Structure;
using ioattn::sparse::SparseRows;
using ioattn::sparse::Support;
using ioattn::sparse::Variant;

std::vector<bf16> narrowed(const std::vector<float>& x) {
    std::vector<bf16> out(x.size());
    ioattn::narrow(x.data(), out.data(), static_cast<std::int64_t>(x.size()));
    return out;
}

std::vector<float> widened(const std::vector<bf16>& x) {
    std::vector<float> out(x.size());
    ioattn::widen(x.data(), out.data(), static_cast<std::int64_t>(x.size()));
    return out;
}

/// The operands of one problem in bf16 and, widened exactly, in float; outputs of both runs.
struct Operands {
    Problem p;
    std::vector<float> q, k, v, d_o;        ///< bf16-representable
    std::vector<bf16> q16, k16, v16, d_o16; ///< the same values
    std::vector<float> o, lse, d_q, d_k, d_v;
    std::vector<bf16> o16, d_q16, d_k16, d_v16;
    std::vector<float> lse16; ///< the bf16 run's L (fp32)
    std::optional<SparseRows<float>> sq, sk, sv;
    std::optional<SparseRows<bf16>> sq16, sk16, sv16;

    Operands(const Problem& problem, std::uint64_t seed, bool normal, double density = 1.0)
        : p(problem) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> randn(0.0F, 1.0F);
        std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
        std::bernoulli_distribution keep(density);
        const auto draw = [&](std::int64_t n) {
            std::vector<float> x(static_cast<std::size_t>(n));
            for (float& e : x)
                e = keep(rng) ? ioattn::round_to_bf16(normal ? randn(rng) : uniform(rng)) : 0.0F;
            return x;
        };
        const std::int64_t bh = p.batch * p.heads, bkv = p.batch * p.kv_heads;
        q = draw(bh * p.n_q * p.d);
        k = draw(bkv * p.n_k * p.d);
        v = draw(bkv * p.n_k * p.d_v);
        d_o = draw(bh * p.n_q * p.d_v);
        q16 = narrowed(q);
        k16 = narrowed(k);
        v16 = narrowed(v);
        d_o16 = narrowed(d_o);
        o.assign(static_cast<std::size_t>(bh * p.n_q * p.d_v), 0.0F);
        lse.assign(static_cast<std::size_t>(bh * p.n_q), 0.0F);
        d_q.assign(q.size(), 0.0F);
        d_k.assign(k.size(), 0.0F);
        d_v.assign(v.size(), 0.0F);
        o16 = narrowed(o);
        lse16 = lse;
        d_q16 = narrowed(d_q);
        d_k16 = narrowed(d_k);
        d_v16 = narrowed(d_v);
        if (density < 1.0) {
            const auto rows = [](const std::vector<float>& x, std::int64_t r, std::int64_t c) {
                return SparseRows<float>::from_dense_threshold(x, r, c, 0.0F);
            };
            const auto rows16 = [](const SparseRows<float>& s) {
                const std::vector<float> val(s.values().begin(), s.values().end());
                return SparseRows<bf16>(
                    s.rows(),
                    s.cols(),
                    std::vector<std::int64_t>(s.offsets().begin(), s.offsets().end()),
                    std::vector<std::int64_t>(s.indices().begin(), s.indices().end()),
                    narrowed(val));
            };
            sq.emplace(rows(q, bh * p.n_q, p.d));
            sk.emplace(rows(k, bkv * p.n_k, p.d));
            sv.emplace(rows(v, bkv * p.n_k, p.d_v));
            sq16.emplace(rows16(*sq));
            sk16.emplace(rows16(*sk));
            sv16.emplace(rows16(*sv));
        }
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

    Structure<float> structure32(const Support* s) const {
        Structure<float> st;
        st.support = s;
        if (sq)
            st.inputs = {&*sq, &*sk, &*sv};
        return st;
    }

    Structure<bf16> structure16(const Support* s) const {
        Structure<bf16> st;
        st.support = s;
        if (sq16)
            st.inputs = {&*sq16, &*sk16, &*sv16};
        return st;
    }
};

/// Whether every bf16 value is the float value rounded to nearest even (NaN: any NaN).
bool rounds_to(const std::vector<bf16>& got, const std::vector<float>& want) {
    for (std::size_t i = 0; i < got.size(); ++i) {
        const bf16 w(want[i]);
        const bool both_nan = std::isnan(static_cast<float>(got[i])) && std::isnan(want[i]);
        if (!(got[i] == w) && !both_nan)
            return false;
    }
    return true;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Runs the forward, then the backward on the forward's outputs, in float on the widened
/// inputs and in bf16 (twice: all threads and one); checks the bf16 outputs are the float ones
/// rounded and the runs of both thread counts are bitwise equal.
void check_against_float(Operands& x, const Support* support, AttentionOptions o) {
    // the widening path: IOATTN_ISA naming the active target keeps the native bf16 kernels off
    // (tests/lib/dense/*_bf16_test.cpp and tests/sparse/forward_fused_bf16_test.cpp test them)
    const ioattn::test::ScopedEnv widening("IOATTN_ISA",
                                           std::string(ioattn::to_string(ioattn::active_isa())));
    const Structure<float> s32 = x.structure32(support);
    const Structure<bf16> s16 = x.structure16(support);
    auto a32 = x.args32();
    auto a16 = x.args16();
    // --- forward ---
    (void)ioattn::attention<float>(a32, s32, o);
    const auto report = ioattn::attention<bf16>(a16, s16, o);
    CHECK(report.plan.schedule ==
          ioattn::plan_attention<float>(x.p, Pass::forward, s32, o).schedule);
    CHECK(rounds_to(x.o16, x.o));
    CHECK(same_bits(x.lse16, x.lse));
    const std::vector<bf16> o_all = x.o16;
    o.threads = 1;
    (void)ioattn::attention<bf16>(a16, s16, o);
    CHECK(x.o16 == o_all);
    o.threads = 0;
    // --- backward, from the bf16 forward's O (rounded) and L ---
    const std::vector<float> o_rounded = widened(x.o16);
    std::copy(o_rounded.begin(), o_rounded.end(), x.o.begin()); // a32 views these buffers
    std::copy(x.lse16.begin(), x.lse16.end(), x.lse.begin());
    (void)ioattn::attention_backward<float>(a32, s32, o);
    (void)ioattn::attention_backward<bf16>(a16, s16, o);
    CHECK(rounds_to(x.d_q16, x.d_q));
    CHECK(rounds_to(x.d_k16, x.d_k));
    CHECK(rounds_to(x.d_v16, x.d_v));
    const std::vector<bf16> dq_all = x.d_q16, dk_all = x.d_k16, dv_all = x.d_v16;
    o.threads = 1;
    (void)ioattn::attention_backward<bf16>(a16, s16, o);
    CHECK(x.d_q16 == dq_all);
    CHECK(x.d_k16 == dk_all);
    CHECK(x.d_v16 == dv_all);
}

Problem shape(std::int64_t n, std::int64_t d, bool causal = false) {
    Problem p;
    p.batch = 1;
    p.heads = 2;
    p.kv_heads = 1;
    p.n_q = p.n_k = n;
    p.d = d;
    p.causal = causal;
    return p.resolved("test");
}

AttentionOptions options(std::optional<Schedule> s, std::optional<Variant> v = std::nullopt) {
    AttentionOptions o;
    o.schedule = s;
    o.variant = v;
    o.memory = MemoryModel{1 << 14};
    return o;
}

TEST_CASE("bf16 entry: dense schedules are the float schedule on widened inputs, rounded",
          "[bf16]") {
    for (const bool causal : {false, true})
        for (const Schedule s : {Schedule::fused, Schedule::materialized, Schedule::reference}) {
            CAPTURE(causal, ioattn::to_string(s));
            Operands x(shape(150, 24, causal), 3, false);
            check_against_float(x, nullptr, options(s));
        }
}

TEST_CASE("bf16 entry: every sparse schedule and variant, dense and sparse operands", "[bf16]") {
    const Problem p = shape(160, 16);
    const Support support = ioattn::sparse::parse_pattern("window:6+random:0.05", 160, 160, 9);
    const std::optional<Variant> forced[] = {
        std::nullopt, Variant::tile, Variant::element, Variant::split, Variant::permuted};
    for (const auto& v : forced) {
        CAPTURE(v ? std::string(ioattn::sparse::to_string(*v)) : std::string("auto"));
        Operands x(p, 4, false);
        check_against_float(x, &support, options(Schedule::fused, v));
    }
    for (const Schedule s : {Schedule::materialized, Schedule::reference}) {
        CAPTURE(ioattn::to_string(s));
        Operands x(p, 5, false);
        check_against_float(x, &support, options(s));
    }
    for (const Schedule s : {Schedule::fused, Schedule::materialized}) { // sparse Q, K, V
        CAPTURE(ioattn::to_string(s), "sparse operands");
        Operands x(p, 6, false, 0.5);
        check_against_float(x, &support, options(s));
    }
}

TEST_CASE("bf16 entry: counted I/O is the float plan's and equals its closed form", "[bf16]") {
    const Problem p = shape(128, 16);
    const Support support = ioattn::sparse::parse_pattern("window:5", 128, 128, 1);
    for (const Support* s : {static_cast<const Support*>(nullptr), &support})
        for (const Pass pass : {Pass::forward, Pass::backward}) {
            Operands x(p, 7, false);
            AttentionOptions o = options(Schedule::fused);
            o.count_io = true;
            const auto r16 =
                pass == Pass::forward
                    ? ioattn::attention<bf16>(x.args16(), x.structure16(s), o)
                    : ioattn::attention_backward<bf16>(x.args16(), x.structure16(s), o);
            const auto r32 =
                pass == Pass::forward
                    ? ioattn::attention<float>(x.args32(), x.structure32(s), o)
                    : ioattn::attention_backward<float>(x.args32(), x.structure32(s), o);
            REQUIRE(r16.io);
            CHECK(*r16.io == *r32.io);
            CHECK(*r16.io == *r16.closed_form);
            const auto dry = ioattn::io_count<bf16>(p, pass, x.structure16(s), o);
            CHECK(*dry.io == *ioattn::io_count<float>(p, pass, x.structure32(s), o).io);
        }
}

TEST_CASE("bf16 entry: bad views throw as in float, naming the caller", "[bf16]") {
    Operands x(shape(32, 8), 8, false);
    auto a = x.args16();
    a.o.data = const_cast<bf16*>(a.q.data); // an output over an input
    AttentionOptions o = options(Schedule::fused);
    o.where = "caller";
    CHECK_THROWS_WITH(ioattn::attention<bf16>(a, {}, o),
                      Catch::Contains("caller") && Catch::Contains("overlaps"));
    auto b = x.args16();
    b.k.rows = 31;
    CHECK_THROWS_AS(ioattn::attention_backward<bf16>(b, {}, o), ioattn::InvalidArgument);
}

TEST_CASE("bf16 entry: adversarial inputs behave as in float", "[bf16][adversarial]") {
    namespace adv = ioattn::test::adversarial;
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
        for (const bool sparse : {false, true}) {
            adv::Case<float> c = adv::make_case<float>(seed * 7 + 1, sparse);
            CAPTURE(seed, sparse, adv::kKinds[c.kind]);
            Operands x(c.p, 1, false);
            for (auto* t : {&c.q, &c.k, &c.v, &c.d_o})
                for (float& e : *t)
                    e = ioattn::round_to_bf16(e);
            x.q = c.q;
            x.k = c.k;
            x.v = c.v;
            x.d_o = c.d_o;
            x.q16 = narrowed(c.q);
            x.k16 = narrowed(c.k);
            x.v16 = narrowed(c.v);
            x.d_o16 = narrowed(c.d_o);
            std::optional<Support> support;
            if (sparse) {
                std::vector<std::int64_t> offsets{0}, cols;
                for (std::int64_t i = 0; i < c.p.n_q; ++i) {
                    for (std::int64_t j = 0; j < c.p.n_k; ++j)
                        if (c.sees(i, j))
                            cols.push_back(j);
                    offsets.push_back(static_cast<std::int64_t>(cols.size()));
                }
                support.emplace(c.p.n_q, c.p.n_k, std::move(offsets), std::move(cols));
            }
            check_against_float(x, support ? &*support : nullptr, options(std::nullopt));
        }
    }
}

} // namespace bf16_entry_test
