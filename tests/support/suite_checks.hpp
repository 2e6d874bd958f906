#pragma once
// Checks of the dense kernel suites that do not depend on the pass: running a case at several
// thread counts (kind 5), CapacityError one word short (kind 3), and the sums and coverage of a
// recorded I/O trace. the forward and backward suites make their checks with these.

#include "reference.hpp"

#include <ioattn/error.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/problem.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <cstdint>
#include <vector>

namespace ioattn::test {

/// Runs `run(one)` with at most 1 thread, `run(two)` with at most 2, and `run(arena)` in a
/// 1-thread task arena: the three results must be bitwise equal (docs/design.md section 11).
template <typename Case, typename Run>
void run_at_thread_counts(Case& one, Case& two, Case& arena, const Run& run) {
    {
        const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
        run(one);
    }
    {
        const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
        run(two);
    }
    with_threads(1, [&] { run(arena); });
}

/// One word less than the counted peak throws CapacityError, given as M or as the counter's
/// capacity alone with `memory` as M. `run(memory, counter)` runs the kernel counted.
template <typename Run>
void check_one_word_short(const Run& run, const MemoryModel& memory, std::int64_t peak) {
    const MemoryModel short_memory{peak - 1};
    IoCounter short_counter(short_memory.fast_words);
    CHECK_THROWS_AS(run(short_memory, short_counter), CapacityError);
    IoCounter small_counter(peak - 1); // the counter alone catches the excess
    CHECK_THROWS_AS(run(memory, small_counter), CapacityError);
}

/// The words of all trace events of one kind.
inline std::int64_t traced_words(const IoCounter& counter, TraceEvent::Kind kind) {
    std::int64_t words = 0;
    for (const TraceEvent& e : counter.trace())
        if (e.kind == kind)
            words += e.moved();
    return words;
}

/// How often each entry of S = Q K^T of every (batch, head) slice of a resolved problem became
/// final, from the blocks of `complete` trace events.
class ScoreCoverage {
public:
    explicit ScoreCoverage(const Problem& r)
        : r_(r)
        , done_(static_cast<std::size_t>(r.batch_heads() * r.n_q * r.n_k), 0) {}

    /// Whether block b lies inside S.
    [[nodiscard]] bool contains(const Block& b) const {
        return b.slice >= 0 && b.slice < r_.batch_heads() && b.row0 >= 0 && b.col0 >= 0 &&
               b.row0 + b.rows <= r_.n_q && b.col0 + b.cols <= r_.n_k;
    }

    /// Counts the entries of block b (which lies inside S) once more.
    void add(const Block& b) {
        for (std::int64_t i = b.row0; i < b.row0 + b.rows; ++i)
            for (std::int64_t j = b.col0; j < b.col0 + b.cols; ++j)
                ++done_[index(b.slice, i, j)];
    }

    /// Checks that every allowed entry became final and none more than once.
    void check_each_allowed_once() const {
        std::int64_t missing = 0;
        std::int64_t repeated = 0;
        for (std::int64_t s = 0; s < r_.batch_heads(); ++s)
            for (std::int64_t i = 0; i < r_.n_q; ++i)
                for (std::int64_t j = 0; j < r_.n_k; ++j) {
                    const int n = done_[index(s, i, j)];
                    missing += (visible(r_, i, j) && n == 0) ? 1 : 0;
                    repeated += n > 1 ? 1 : 0;
                }
        CHECK(missing == 0);
        CHECK(repeated == 0);
    }

private:
    [[nodiscard]] std::size_t index(std::int64_t s, std::int64_t i, std::int64_t j) const {
        return static_cast<std::size_t>((s * r_.n_q + i) * r_.n_k + j);
    }

    Problem r_;
    std::vector<int> done_;
};

} // namespace ioattn::test
