// Property tests of the io objective (docs/design.md section 7.1; sparse/src/plan/
// fewest_words.cpp, sparse/src/entry/plan_fewest.cpp): the counted I/O of the plan that
// plan_attention makes under Objective::io is non-increasing in M, for dense and causal
// problems, a pattern of each family of the sparse suite and sparse inputs, forward and
// backward, over M = the powers of two and seeded random values from the smallest M that fits;
// so is each forced variant's; a dry run of the plan (io_count) equals its closed form; and the
// io plan never moves more words than the speed plan at the grid's own memories.

#include <ioattn/attention.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/sparse_rows.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

using ioattn::AttentionOptions;
using ioattn::Kernels;
using ioattn::MemoryModel;
using ioattn::Objective;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Structure;
using ioattn::sparse::Support;
using ioattn::sparse::Variant;

namespace {

constexpr std::int64_t kMonoN = 192;
constexpr std::int64_t kMonoD = 16;
constexpr int kMonoRandomPoints = 12;

Problem mono_problem(bool causal = false) {
    Problem p;
    p.n_q = kMonoN;
    p.n_k = kMonoN;
    p.d = kMonoD;
    p.causal = causal;
    return p.resolved();
}

/// M over the powers of two and kMonoRandomPoints log-uniform values (seeded), from the
/// smallest M of either schedule to 4 (n_q + n_k) d, ascending.
std::vector<std::int64_t> mono_memories(const Problem& p, Pass pass, Kernels k) {
    const std::int64_t lo = ioattn::smallest_memory(p, pass, std::nullopt, k);
    const std::int64_t hi = 4 * (p.n_q + p.n_k) * p.d;
    std::vector<std::int64_t> ms{lo, hi};
    for (std::int64_t m = 1; m <= hi; m *= 2)
        if (m > lo)
            ms.push_back(m);
    std::mt19937_64 rng(41);
    std::uniform_real_distribution<double> u(std::log(static_cast<double>(lo)),
                                             std::log(static_cast<double>(hi)));
    for (int i = 0; i < kMonoRandomPoints; ++i)
        ms.push_back(static_cast<std::int64_t>(std::exp(u(rng))));
    std::sort(ms.begin(), ms.end());
    ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
    return ms;
}

/// The counted words of the plan of `objective` at M (nullopt: a forced variant has no plan).
std::optional<std::int64_t> mono_words(const Problem& p,
                                       Pass pass,
                                       const Structure<float>& st,
                                       std::int64_t m,
                                       std::optional<Variant> variant,
                                       Objective objective = Objective::io) {
    AttentionOptions o;
    o.memory = MemoryModel{m};
    o.objective = objective;
    o.variant = variant;
    try {
        const auto plan = ioattn::plan_attention<float>(p, pass, st, o);
        CHECK(plan.objective == objective);
        CHECK(plan.planned_for <= m);
        return ioattn::io_cost(plan, st).total();
    } catch (const ioattn::CapacityError&) {
        REQUIRE(variant.has_value()); // auto always has a plan at M >= smallest_memory
        return std::nullopt;
    }
}

/// Asserts that the words are non-increasing over mono_memories, and that once a plan fits, a
/// larger M has one too.
void check_monotone(const Problem& p,
                    Pass pass,
                    const Structure<float>& st,
                    std::optional<Variant> variant = std::nullopt) {
    std::optional<std::int64_t> prev;
    for (const std::int64_t m :
         mono_memories(p, pass, st.sparse() ? Kernels::sparse : Kernels::dense)) {
        const auto w = mono_words(p, pass, st, m, variant);
        CAPTURE(m, prev, w);
        if (prev) {
            REQUIRE(w.has_value());
            CHECK(*w <= *prev);
        }
        if (w)
            prev = w;
    }
}

const std::vector<std::string>& mono_patterns() {
    static const std::vector<std::string> specs{"window:16",
                                                "causal-window:16",
                                                "bigbird:16:2:3",
                                                "bigbird-block:16:3:2:3",
                                                "strided:16",
                                                "dilated:32:4",
                                                "block:16:0.2",
                                                "random:0.05",
                                                "powerlaw:8",
                                                "global:2+window:8"};
    return specs;
}

} // namespace

TEST_CASE("io objective: dense and causal I/O is non-increasing in M", "[sparse][objective]") {
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const bool causal = GENERATE(false, true);
    CAPTURE(pass, causal);
    check_monotone(mono_problem(causal), pass, {});
}

TEST_CASE("io objective: each pattern family's I/O is non-increasing in M, every variant",
          "[sparse][objective]") {
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const Problem p = mono_problem();
    for (const std::string& spec : mono_patterns()) {
        const Support s = ioattn::sparse::parse_pattern(spec, p.n_q, p.n_k, 7);
        Structure<float> st;
        st.support = &s;
        for (const std::optional<Variant> v : {std::optional<Variant>{},
                                               std::optional<Variant>{Variant::tile},
                                               std::optional<Variant>{Variant::element},
                                               std::optional<Variant>{Variant::split},
                                               std::optional<Variant>{Variant::permuted}}) {
            CAPTURE(pass, spec, v ? std::string(ioattn::sparse::to_string(*v)) : "auto");
            check_monotone(p, pass, st, v);
        }
    }
}

TEST_CASE("io objective: sparse inputs' I/O is non-increasing in M", "[sparse][objective]") {
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const Problem p = mono_problem();
    // a third of each row's entries, shifted per row; every fifth row empty
    const auto stored = [&](std::int64_t rows, std::int64_t cols) {
        std::vector<std::int64_t> offsets{0}, indices;
        for (std::int64_t i = 0; i < rows; ++i) {
            for (std::int64_t j = 0; j < cols && i % 5 != 4; ++j)
                if ((i + j) % 3 == 0)
                    indices.push_back(j);
            offsets.push_back(static_cast<std::int64_t>(indices.size()));
        }
        std::vector<float> values(indices.size(), 0.5F);
        return ioattn::sparse::SparseRows<float>(
            rows, cols, std::move(offsets), std::move(indices), std::move(values));
    };
    const auto q = stored(p.n_q, p.d), k = stored(p.n_k, p.d), v = stored(p.n_k, p.d_v);
    for (const std::string spec : {"dense", "window:16", "random:0.05"}) {
        CAPTURE(pass, spec);
        const Support s = ioattn::sparse::parse_pattern(spec, p.n_q, p.n_k, 7);
        Structure<float> st;
        st.support = &s;
        st.inputs = {&q, &k, &v};
        check_monotone(p, pass, st);
    }
}

TEST_CASE("io objective: the walk equals the closed form, and grid memories never lose to speed",
          "[sparse][objective]") {
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const Problem p = mono_problem();
    for (const std::string spec : {"window:16", "random:0.05", "strided:16"}) {
        const Support s = ioattn::sparse::parse_pattern(spec, p.n_q, p.n_k, 7);
        Structure<float> st;
        st.support = &s;
        for (const std::int64_t m :
             ioattn::sparse::memory_grid(p, pass, Kernels::sparse, 1 << 14)) {
            CAPTURE(pass, spec, m);
            AttentionOptions o;
            o.memory = MemoryModel{m};
            const auto counted = ioattn::io_count<float>(p, pass, st, o); // io by default
            CHECK(counted.plan.objective == Objective::io);
            CHECK(*counted.io == *counted.closed_form);
            CHECK(counted.io->peak <= m);
            // the speed plan for a grid memory is among the io objective's candidates
            const auto speed = mono_words(p, pass, st, m, std::nullopt, Objective::speed);
            REQUIRE(speed.has_value());
            CHECK(counted.io->total() <= *speed);
        }
    }
}
