#pragma once
// Running one dense forward kernel in the tests, its edge shapes and the checks of its outputs
// against the reference (used by the forward suites: forward_suite.hpp, forward_suite_values.hpp,
// forward_suite_io.hpp).

#include "attention_case.hpp"
#include "case_data.hpp"
#include "printing.hpp"
#include "random.hpp"
#include "reference.hpp"
#include "suite_checks.hpp"
#include "tolerance.hpp"

#include <ioattn/dense/forward.hpp>
#include <ioattn/error.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ioattn::test {

/// Runs one kernel. The reference ignores tiling and memory.
template <typename T, typename Counter>
void run_kernel(const ForwardArgs<T>& args,
                const Tiling& tiling,
                const MemoryModel& memory,
                Counter& counter) {
    switch (tiling.schedule) {
    case Schedule::reference:
        dense::forward_reference<T>(args);
        return;
    case Schedule::fused:
        dense::forward_fused<T, Counter>(args, tiling, memory, counter);
        return;
    case Schedule::materialized:
        dense::forward_materialized<T, Counter>(args, tiling, memory, counter);
        return;
    }
}

/// Runs one kernel uncounted with M exactly the tiling's residency (generous for reference).
template <typename T>
void run_kernel(const ForwardArgs<T>& args, const Tiling& tiling) {
    NullCounter counter;
    run_kernel<T, NullCounter>(
        args, tiling, exact_memory(tiling, args.problem, Pass::forward), counter);
}

/// Edge shapes: n_q != n_k both ways, n_q = 1, n_k = 1, d = 1, d_v != d both ways, sizes that
/// are multiples of no tile, causal both ways (fully masked rows when n_q > n_k), GQA/MQA, batch.
inline std::vector<Shape> edge_shapes() {
    return {
        {1, 1, 0, 1, 1, 1, 0, false},
        {1, 1, 0, 1, 37, 16, 0, false},
        {1, 1, 0, 1, 37, 16, 0, true},
        {1, 1, 0, 37, 1, 16, 0, false},
        {1, 1, 0, 29, 53, 1, 0, false},
        {1, 1, 0, 53, 29, 8, 0, false},
        {1, 1, 0, 29, 53, 8, 3, false},
        {1, 1, 0, 31, 17, 4, 13, false},
        {1, 1, 0, 29, 53, 8, 0, true},
        {1, 1, 0, 53, 29, 8, 0, true},
        {1, 1, 0, 64, 64, 16, 0, true},
        {2, 4, 2, 33, 45, 8, 0, false},
        {2, 6, 3, 45, 33, 8, 5, true},
        {3, 2, 1, 17, 19, 12, 0, false},
        {1, 1, 0, 7, 300, 64, 0, false},
        {1, 2, 1, 100, 100, 32, 0, true},
    };
}

/// Checks a finished run of `c` against the naive oracle with the error rule, and that the
/// output padding is untouched.
template <typename T>
void check_outputs(const AttentionCase<T>& c) {
    const auto oracle = c.template naive<Oracle<T>>();
    const auto naive_t = c.template naive<T>();
    const std::vector<double> o = c.o.packed();
    const std::vector<double> lse = c.lse.packed();
    const ErrorCheck eo = error_rule<T>(o, naive_t.o, oracle.o);
    const ErrorCheck el = error_rule<T>(lse, naive_t.lse, oracle.lse);
    INFO("O: err(kernel) = " << static_cast<double>(eo.kernel_error)
                             << ", err(naive) = " << static_cast<double>(eo.naive_error)
                             << ", allowed = " << static_cast<double>(eo.allowed));
    INFO("L: err(kernel) = " << static_cast<double>(el.kernel_error)
                             << ", err(naive) = " << static_cast<double>(el.naive_error)
                             << ", allowed = " << static_cast<double>(el.allowed));
    CHECK(eo.passed());
    CHECK(el.passed());
    CHECK(c.outputs_padding_intact());
}

/// Rows with no visible key must give O = 0 and L = -inf exactly.
template <typename T>
void check_masked_rows_exact(const AttentionCase<T>& c) {
    const Problem& p = c.problem;
    std::int64_t masked = 0;
    for (std::int64_t b = 0; b < p.batch; ++b)
        for (std::int64_t h = 0; h < p.heads; ++h)
            for (std::int64_t i = 0; i < p.n_q; ++i) {
                bool any = false;
                for (std::int64_t j = 0; j < p.n_k; ++j)
                    any = any || visible(p, i, j);
                if (any)
                    continue;
                ++masked;
                CAPTURE(b, h, i);
                CHECK(c.lse(b, h, i, 0) == -std::numeric_limits<T>::infinity());
                for (std::int64_t col = 0; col < p.d_v; ++col)
                    CHECK(c.o(b, h, i, col) == T(0));
            }
    if (p.causal && p.n_q > p.n_k)
        CHECK(masked == p.batch * p.heads * (p.n_q - p.n_k));
}

/// Random forward cases: sizes up to 80, d and d_v up to 40.
inline constexpr RandomCases kForwardRandom{Pass::forward, 80, 40};

} // namespace ioattn::test
