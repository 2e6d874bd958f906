#pragma once
// What a case of the dense kernel suites is made of, for either pass: the shape table type, the
// edge and random tilings of a schedule, the seeded random problem and padding, the kernel's
// public name, and the memory an uncounted run gets. The forward and
// backward suites draw their cases from here, so both passes are set up alike.

#include "attention_case.hpp"
#include "random.hpp"
#include "reference.hpp"

#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ioattn::test {

/// A shape of an edge-case table.
struct Shape {
    std::int64_t batch, heads, kv_heads, n_q, n_k, d, d_v;
    bool causal;

    [[nodiscard]] Problem problem() const {
        return {.batch = batch,
                .heads = heads,
                .kv_heads = kv_heads,
                .n_q = n_q,
                .n_k = n_k,
                .d = d,
                .d_v = d_v,
                .causal = causal};
    }
};

/// The kernel's public name, as its messages must give it: `<pass>_<schedule>`.
inline std::string kernel_name(Pass pass, Schedule s) {
    const std::string prefix = pass == Pass::forward ? "forward_" : "backward_";
    switch (s) {
    case Schedule::reference:
        return prefix + "reference";
    case Schedule::fused:
        return prefix + "fused";
    case Schedule::materialized:
        return prefix + "materialized";
    }
    return "?";
}

/// M for an uncounted run: exactly the tiling's residency in `pass` (generous for the reference,
/// which ignores tiling and memory).
inline MemoryModel exact_memory(const Tiling& tiling, const Problem& problem, Pass pass) {
    return MemoryModel{tiling.schedule == Schedule::reference
                           ? std::int64_t{1} << 40
                           : tiling.resident_words(problem, pass)};
}

/// Tilings of `schedule` worth trying on p in `pass`: degenerate, odd, larger than the problem
/// (forward fused: n_q + 5 by n_k + 5; otherwise a square side 3 past every size), and the
/// for_memory tiling for a mid-sized M.
inline std::vector<Tiling> edge_tilings(Schedule schedule, const Problem& problem, Pass pass) {
    const Problem p = resolve(problem);
    const std::int64_t big = std::max({p.n_q, p.n_k, p.d, p.d_v}) + 3;
    switch (schedule) {
    case Schedule::reference:
        return {Tiling{Schedule::reference, p.n_q, p.n_k}};
    case Schedule::fused: {
        const Tiling larger = pass == Pass::forward ? Tiling{Schedule::fused, p.n_q + 5, p.n_k + 5}
                                                    : Tiling{Schedule::fused, big, big};
        std::vector<Tiling> t = {{Schedule::fused, 1, 1},
                                 {Schedule::fused, 3, 5},
                                 {Schedule::fused, 8, 4},
                                 {Schedule::fused, 16, 64},
                                 larger};
        if (auto m = Tiling::try_for_memory(
                Schedule::fused, MemoryModel{16 * (p.d + p.d_v) * 8}, p, pass))
            t.push_back(*m);
        return t;
    }
    case Schedule::materialized: {
        std::vector<Tiling> t = {{Schedule::materialized, 1, 1},
                                 {Schedule::materialized, 2, 2},
                                 {Schedule::materialized, 5, 5},
                                 {Schedule::materialized, 16, 16},
                                 {Schedule::materialized, big, big}};
        if (pass == Pass::forward) { // feature chunks narrower and wider than the tiles
            t.push_back({Schedule::materialized, 5, 5, 3});
            t.push_back({Schedule::materialized, 2, 2, big});
        }
        if (auto m = Tiling::try_for_memory(Schedule::materialized, MemoryModel{1024}, p, pass))
            t.push_back(*m);
        return t;
    }
    }
    return {};
}

/// A random problem: n_q, n_k up to max_n, d and d_v up to max_d, GQA, causal, d_v != d and an
/// explicit scale sometimes.
inline Problem random_problem(Rng& rng, std::int64_t max_n, std::int64_t max_d) {
    Problem p;
    p.batch = rng.uniform_int(1, 2);
    p.kv_heads = rng.uniform_int(1, 2);
    p.heads = p.kv_heads * rng.uniform_int(1, 3);
    p.n_q = rng.uniform_int(1, max_n);
    p.n_k = rng.uniform_int(1, max_n);
    p.d = rng.uniform_int(1, max_d);
    p.d_v = rng.uniform_int(0, 1) == 0 ? p.d : rng.uniform_int(1, max_d);
    p.causal = rng.uniform_int(0, 1) == 1;
    if (rng.uniform_int(0, 3) == 0)
        p.scale = rng.uniform(0.05, 2.0);
    return p;
}

/// A random valid tiling of `schedule` for p in `pass` (the backward's fused row and column
/// tiles both range up to max(n_q, n_k)).
inline Tiling random_tiling(Rng& rng, Schedule schedule, const Problem& problem, Pass pass) {
    const Problem p = resolve(problem);
    const std::int64_t n = std::max(p.n_q, p.n_k);
    switch (schedule) {
    case Schedule::reference:
        return {Schedule::reference, p.n_q, p.n_k};
    case Schedule::fused: {
        const std::int64_t rows = pass == Pass::forward ? p.n_q : n;
        const std::int64_t cols = pass == Pass::forward ? p.n_k : n;
        return {Schedule::fused, rng.uniform_int(1, rows + 4), rng.uniform_int(1, cols + 4)};
    }
    case Schedule::materialized: {
        const std::int64_t b = rng.uniform_int(1, std::max({n, p.d, p.d_v}) + 2);
        Tiling t{Schedule::materialized, b, b};
        // the forward's feature chunks of their own width, half the time
        if (pass == Pass::forward && rng.uniform_int(0, 1) == 1)
            t.depth = rng.uniform_int(1, std::max(p.d, p.d_v) + 2);
        return t;
    }
    }
    return {};
}

/// Packed views half the time, otherwise random row, head and batch padding.
inline Padding random_padding(Rng& rng) {
    return rng.uniform_int(0, 1) == 0
               ? Padding{}
               : Padding{rng.uniform_int(0, 3), rng.uniform_int(0, 9), rng.uniform_int(0, 9)};
}

/// The padding of the edge-shape suites: none, or 3, 5 and 7 extra elements.
inline Padding edge_padding(bool padded) {
    return padded ? Padding{3, 5, 7} : Padding{};
}

/// Calls body(p, tiling, seed, padded) for each shape, each edge tiling of it in `pass`, and
/// packed then padded views (edge_padding), the seed counting up from first_seed + 1.
template <typename Body>
void for_each_edge_case(const std::vector<Shape>& shapes,
                        Schedule schedule,
                        Pass pass,
                        std::uint64_t first_seed,
                        const Body& body) {
    std::uint64_t seed = first_seed;
    for (const Shape& s : shapes) {
        const Problem p = s.problem();
        for (const Tiling& tiling : edge_tilings(schedule, p, pass))
            for (const bool padded : {false, true})
                body(p, tiling, ++seed, padded);
    }
}

/// The random cases of one pass: n_q, n_k up to max_n, d, d_v up to max_d.
struct RandomCases {
    Pass pass;
    std::int64_t max_n;
    std::int64_t max_d;
};

/// Calls body(rng, seed, p, tiling) for `cases` seeds counting up from first_seed, where
/// rng = Rng(seed) has drawn the random problem p and then its random tiling of `schedule`; the
/// body may draw further from rng.
template <typename Body>
void for_each_random_case(const RandomCases& draw,
                          Schedule schedule,
                          int cases,
                          std::uint64_t first_seed,
                          const Body& body) {
    for (int n = 0; n < cases; ++n) {
        const auto seed = first_seed + static_cast<std::uint64_t>(n);
        Rng rng(seed);
        const Problem p = random_problem(rng, draw.max_n, draw.max_d);
        const Tiling tiling = random_tiling(rng, schedule, p, draw.pass);
        body(rng, seed, p, tiling);
    }
}

} // namespace ioattn::test
