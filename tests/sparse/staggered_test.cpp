// Tests of the staggered paths of the fused sparse kernels (sparse/src/kernels/tile/slab_parts.hpp,
// staggered_slab.hpp, staggered_chunk.hpp): slabs of lane vectors that see different spans of
// a chunk (bands, causal blocks, a window with global keys, groups of empty rows, row counts
// that leave a partial vector), forward and backward against the double reference, and a
// non-finite streamed row inside a vector's span that only some of its rows may see.
// Blocks of 64 and 48 rows (keys in the backward) hold two or more lane vectors under every
// instruction set (16 floats or 8 doubles per vector at most), so they stagger when their
// vectors' spans differ; staggered_whitebox_test.cpp checks that these supports and tilings
// do reach slabs that stagger.

#include "kernel_case.hpp"

#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::sparse::Support;
using ioattn::sparse::test::Case;

namespace {

/// window:w with the rows of [32, 48) and [100, 120) left empty (lane vectors, and parts of
/// them, with no key).
Support band_with_gaps(std::int64_t n_q, std::int64_t n_k, std::int64_t w) {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < n_q; ++i) {
        const bool empty = (i >= 32 && i < 48) || (i >= 100 && i < 120);
        for (std::int64_t j = std::max<std::int64_t>(0, i - w); !empty && j <= i + w && j < n_k;
             ++j)
            cols.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return {n_q, n_k, std::move(offsets), std::move(cols)};
}

const std::vector<std::string> kSpecs = {"window:5",
                                         "window:20",
                                         "causal",
                                         "window:9&causal",
                                         "global:2+window:6",
                                         "bigbird:6:2:2",
                                         "strided:16"};

const std::vector<std::pair<std::int64_t, std::int64_t>> kShapes = {
    {200, 230}, {230, 200}, {77, 77}};

const std::vector<Tiling> kTilings = {
    {Schedule::fused, 64, 128}, {Schedule::fused, 64, 48}, {Schedule::fused, 48, 33}};

template <typename T>
void run_fused(Case<T>& c, const Support& s, const Tiling& t) {
    NullCounter io;
    ioattn::sparse::forward_fused(c.forward(), s, t, MemoryModel{1 << 22}, io);
}

/// O and L of forward_fused on (p, s) under t against the double reference (error rule).
template <typename T>
void check_staggered(const Problem& p, const Support& s, const Tiling& t) {
    Case<T> c(p, 7);
    const Case<double> oracle = ioattn::sparse::test::reference_of(p, c, s);
    const double naive =
        ioattn::sparse::test::max_error(ioattn::sparse::test::naive_output(c, s), oracle.o);
    run_fused(c, s, t);
    const double tiny = 8 * static_cast<double>(std::numeric_limits<T>::epsilon());
    CHECK(ioattn::sparse::test::max_error(c.o, oracle.o) <= 2 * naive + tiny);
    ioattn::sparse::test::check_lse(c.lse, oracle.lse);
}

} // namespace

TEMPLATE_TEST_CASE("sparse forward_fused: slabs whose lane vectors see different spans",
                   "[sparse][forward][staggered]",
                   float,
                   double) {
    for (const auto& [n_q, n_k] : kShapes) {
        const Problem p = ioattn::sparse::test::kernel_shape(1, n_q, n_k, 7);
        for (const Tiling& t : kTilings) {
            for (const std::string& spec : kSpecs) {
                CAPTURE(spec, n_q, n_k, t.rows, t.cols);
                check_staggered<TestType>(p, ioattn::sparse::parse_pattern(spec, n_q, n_k, 3), t);
            }
            CAPTURE(n_q, n_k, t.rows, t.cols);
            check_staggered<TestType>(p, band_with_gaps(n_q, n_k, 7), t);
        }
    }
}

TEMPLATE_TEST_CASE("sparse backward_fused: key blocks whose lane vectors see different spans",
                   "[sparse][backward][staggered]",
                   float,
                   double) {
    for (const auto& [n_q, n_k] : kShapes) {
        const Problem p = ioattn::sparse::test::backward_shape(n_q, n_k, 7);
        for (const Tiling& t : kTilings) {
            const auto run = [&](Case<TestType>& c, const Support& s) {
                NullCounter io;
                ioattn::sparse::backward_fused(c.backward(), s, t, MemoryModel{1 << 22}, io);
            };
            for (const std::string& spec : kSpecs) {
                CAPTURE(spec, n_q, n_k, t.rows, t.cols);
                ioattn::sparse::test::check_backward_agrees<TestType>(
                    p, ioattn::sparse::parse_pattern(spec, n_q, n_k, 3), 5, run);
            }
            CAPTURE(n_q, n_k, t.rows, t.cols);
            // keys in groups with no query (the transpose of rows with no key)
            ioattn::sparse::test::check_backward_agrees<TestType>(
                p, band_with_gaps(n_k, n_q, 7).transposed(), 5, run);
        }
    }
}

TEMPLATE_TEST_CASE("sparse forward_fused: a staggered slab keeps a non-finite V row from the "
                   "rows that do not see it",
                   "[sparse][forward][staggered]",
                   float,
                   double) {
    using T = TestType;
    // key 70 is inside the span of the lane vectors of rows [64, 80) but seen only by the rows
    // within 5 of it; its V row holds inf and NaN
    const std::int64_t n = 160, j = 70;
    const Problem p = ioattn::sparse::test::kernel_shape(1, n, n, 5);
    const Support s = ioattn::sparse::parse_pattern("window:5", n, n, 3);
    Case<T> c(p, 11);
    c.v[static_cast<std::size_t>(j * p.d_v)] = std::numeric_limits<T>::infinity();
    c.v[static_cast<std::size_t>(j * p.d_v + 1)] = std::numeric_limits<T>::quiet_NaN();
    const Case<double> oracle = ioattn::sparse::test::reference_of(p, c, s);
    run_fused(c, s, Tiling{Schedule::fused, 64, 64});
    for (std::int64_t i = 0; i < n; ++i) {
        CAPTURE(i);
        const bool sees = s.contains(i, j);
        for (std::int64_t z = 0; z < p.d_v; ++z) {
            const auto at = static_cast<std::size_t>(i * p.d_v + z);
            CHECK(std::isfinite(oracle.o[at]) == std::isfinite(static_cast<double>(c.o[at])));
            if (!sees)
                CHECK(std::abs(static_cast<double>(c.o[at]) - oracle.o[at]) <=
                      64 * static_cast<double>(std::numeric_limits<T>::epsilon()));
        }
    }
}

TEMPLATE_TEST_CASE("sparse backward_fused: a staggered key block keeps a non-finite Q row from "
                   "the keys that do not see it",
                   "[sparse][backward][staggered]",
                   float,
                   double) {
    using T = TestType;
    // query 70 is inside the span of the key vectors of keys [64, 80) but seen only by the
    // keys within 5 of it; its Q row holds inf and NaN
    const std::int64_t n = 160, i = 70;
    const Problem p = ioattn::sparse::test::backward_shape(n, n, 5);
    const Support s = ioattn::sparse::parse_pattern("window:5", n, n, 3);
    Case<T> c(p, 11);
    c.q[static_cast<std::size_t>(i * p.d)] = std::numeric_limits<T>::infinity();
    c.q[static_cast<std::size_t>(i * p.d + 1)] = std::numeric_limits<T>::quiet_NaN();
    const Case<double> ref = ioattn::sparse::test::reference_gradients(p, c, s, 11);
    NullCounter io;
    ioattn::sparse::backward_fused(
        c.backward(), s, Tiling{Schedule::fused, 64, 64}, MemoryModel{1 << 22}, io);
    ioattn::sparse::test::check_kv_gradients_where_finite(c, ref);
}
