// Tests of the parallel pattern builders (sparse/src/patterns/parallel_rows.hpp): build_sized and
// build_chunks (and build_chunks_expected, its chunks in slots or outgrowing them) give the
// arrays of the serial row-by-row build_rows across task boundaries, and
// the builders written from their parameters (row sizes in closed form) give the pairs of their
// predicates, element for element, on shapes that cross the builders' tasks (N not a multiple
// of the block or stride, windows wider than N, n_q != n_k), for 1 and 2 threads.

#include "brute_force.hpp"
#include "patterns/parallel_rows.hpp"

#include <ioattn/parallel.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace sp = ioattn::sparse;
using ioattn::sparse::Support;

namespace {

/// Row i of the synthetic support: (i * 7) % 5 keys spaced by i % 3 + 1 from i % 11.
std::vector<std::int64_t> synthetic_row(std::int64_t i, std::int64_t n_k) {
    std::vector<std::int64_t> r;
    for (std::int64_t c = 0, j = i % 11; c < (i * 7) % 5 && j < n_k; ++c, j += i % 3 + 1)
        r.push_back(j);
    return r;
}

std::int64_t pr_abs(std::int64_t x) {
    return x < 0 ? -x : x;
}

/// Shapes that cut the builders' tasks (rows_per_task: 256 rows) unevenly.
const std::vector<std::pair<std::int64_t, std::int64_t>> kParallelShapes{
    {0, 5}, {1, 1}, {255, 255}, {257, 300}, {1000, 1000}, {1000, 700}, {700, 1000}, {1537, 1537}};

} // namespace

TEST_CASE("build_sized and build_chunks assemble what build_rows does", "[parallel_rows]") {
    for (const auto& [n_q, n_k] : kParallelShapes) {
        CAPTURE(n_q, n_k);
        const Support serial = sp::detail::build_rows(
            "test", n_q, n_k, [&](std::int64_t i, std::vector<std::int64_t>& cols) {
                const auto r = synthetic_row(i, n_k);
                cols.insert(cols.end(), r.begin(), r.end());
            });
        const auto sized = [&] {
            return sp::detail::build_sized(
                "test",
                n_q,
                n_k,
                [&](std::int64_t i) {
                    return static_cast<std::int64_t>(synthetic_row(i, n_k).size());
                },
                sp::detail::stateless([&](std::int64_t i, std::int64_t* out) {
                    for (const std::int64_t j : synthetic_row(i, n_k))
                        *out++ = j;
                }));
        };
        const auto chunks = [&] {
            return sp::detail::build_chunks("test", n_q, n_k, [&] {
                return [&](std::int64_t i, std::vector<std::int64_t>& cols) {
                    const auto r = synthetic_row(i, n_k);
                    cols.insert(cols.end(), r.begin(), r.end());
                };
            });
        };
        // with the rows' expected size (2 keys): in slots closed up in place; with far too
        // few expected: every chunk outgrows its slot and keeps its own array
        const auto expected = [&](double per_row) {
            return sp::detail::build_chunks_expected(
                "test",
                n_q,
                n_k,
                [&] {
                    return [&](std::int64_t i, std::vector<std::int64_t>& cols) {
                        const auto r = synthetic_row(i, n_k);
                        cols.insert(cols.end(), r.begin(), r.end());
                    };
                },
                per_row);
        };
        for (const int threads : {1, 2}) {
            CAPTURE(threads);
            CHECK(ioattn::with_threads(threads, sized) == serial);
            CHECK(ioattn::with_threads(threads, chunks) == serial);
            for (const double per_row : {2.0, 0.01}) {
                CAPTURE(per_row);
                CHECK(ioattn::with_threads(threads, [&] { return expected(per_row); }) == serial);
            }
        }
    }
}

TEST_CASE("structured builders equal their predicates across tasks", "[parallel_rows]") {
    using sp::test::from_predicate;
    for (const auto& [n_q, n_k] : kParallelShapes) {
        CAPTURE(n_q, n_k);
        const std::int64_t off = n_k - n_q;
        for (const int threads : {1, 2}) {
            CAPTURE(threads);
            const auto built = [&](auto build) { return ioattn::with_threads(threads, build); };
            for (const std::int64_t w : {0, 3, 256, 5000}) { // 5000: wider than every N here
                CAPTURE(w);
                CHECK(built([&] { return sp::pattern_window(n_q, n_k, w); }) ==
                      from_predicate(
                          n_q, n_k, [&](auto i, auto j) { return pr_abs(i + off - j) <= w; }));
                CHECK(built([&] { return sp::pattern_causal_window(n_q, n_k, w); }) ==
                      from_predicate(n_q, n_k, [&](auto i, auto j) {
                          return i + off - j >= 0 && i + off - j <= w;
                      }));
                for (const std::int64_t s : {1, 4, 7}) {
                    CAPTURE(s);
                    CHECK(built([&] { return sp::pattern_dilated(n_q, n_k, w, s); }) ==
                          from_predicate(n_q, n_k, [&](auto i, auto j) {
                              return pr_abs(i + off - j) <= w * s && (i + off - j) % s == 0;
                          }));
                }
            }
            for (const std::int64_t l : {1, 64, 100, 3000}) { // 100 and 3000: N % L != 0
                CAPTURE(l);
                CHECK(built([&] { return sp::pattern_strided(n_q, n_k, l); }) ==
                      from_predicate(n_q, n_k, [&](auto i, auto j) {
                          const std::int64_t p = i + off;
                          return j <= p && (j / l == p / l || j % l == l - 1);
                      }));
            }
            for (const std::int64_t g : {0, 2, 300}) {
                CAPTURE(g);
                CHECK(built([&] { return sp::pattern_global(n_q, n_k, g); }) ==
                      from_predicate(n_q, n_k, [&](auto i, auto j) {
                          return (i + off >= 0 && i + off < g) || j < g;
                      }));
            }
            CHECK(built([&] { return sp::pattern_causal(n_q, n_k); }) ==
                  from_predicate(n_q, n_k, [&](auto i, auto j) { return j <= i + off; }));
            CHECK(built([&] { return sp::pattern_dense(n_q, n_k); }) ==
                  from_predicate(n_q, n_k, [](auto, auto) { return true; }));
        }
    }
}

TEST_CASE("seeded builders: whole blocks and thread independence across tasks", "[parallel_rows]") {
    for (const auto& [n_q, n_k] : kParallelShapes) {
        CAPTURE(n_q, n_k);
        for (const std::int64_t b : {64, 100}) { // 100: N not a multiple of the block
            CAPTURE(b);
            const auto block = [&] { return sp::pattern_block(n_q, n_k, b, 0.3, 7); };
            const Support s = ioattn::with_threads(1, block);
            CHECK(ioattn::with_threads(2, block) == s);
            // every row holds whole column blocks (the last one cut at n_k), shared by its
            // row block
            for (std::int64_t i = 0; i < n_q; ++i) {
                const auto r = s.row(i);
                const auto first = s.row(i / b * b);
                REQUIRE(std::vector<std::int64_t>(r.begin(), r.end()) ==
                        std::vector<std::int64_t>(first.begin(), first.end()));
                for (const std::int64_t j : r)
                    REQUIRE(s.contains(i, j / b * b));
            }
            const auto bb = [&] { return sp::pattern_bigbird_block(n_q, n_k, b, 3, 2, 3, 7); };
            CHECK(ioattn::with_threads(1, bb) == ioattn::with_threads(2, bb));
        }
        const auto seeded = [&] {
            return sp::union_of(sp::pattern_random(n_q, n_k, 0.02, 3),
                                sp::pattern_bigbird(n_q, n_k, 64, 2, 3, 3));
        };
        CHECK(ioattn::with_threads(1, seeded) == ioattn::with_threads(2, seeded));
        if (n_k > 0 && n_q > 0) {
            const auto pl = [&] { return sp::pattern_powerlaw(n_q, n_k, 8.0, 3); };
            CHECK(ioattn::with_threads(1, pl) == ioattn::with_threads(2, pl));
        }
    }
}

TEST_CASE("the parallel transpose equals the pairs' transpose", "[parallel_rows]") {
    // parts of rows cut unevenly: dense 49 x 3 gives 12 parts of 5 rows, the last ones empty
    const std::vector<Support> supports{sp::pattern_dense(49, 3),
                                        sp::pattern_dense(200, 7),
                                        sp::pattern_window(1000, 700, 40),
                                        sp::pattern_random(777, 300, 0.2, 5),
                                        sp::pattern_strided(513, 513, 64),
                                        Support::none(5, 4)};
    for (const Support& s : supports) {
        CAPTURE(s.n_q(), s.n_k(), s.z_qk());
        const Support t = s.transposed();
        CHECK(t == sp::test::from_predicate(
                       s.n_k(), s.n_q(), [&](auto j, auto i) { return s.contains(i, j); }));
        const auto at = s.transposed_positions();
        REQUIRE(static_cast<std::int64_t>(at.size()) == s.z_qk());
        std::int64_t e = 0;
        for (std::int64_t j = 0; j < t.n_q(); ++j)
            for (const std::int64_t i : t.row(j)) { // entry e of the transpose is (i, j) of s
                const std::int64_t p = at[static_cast<std::size_t>(e++)];
                REQUIRE(p >= s.row_offsets()[static_cast<std::size_t>(i)]);
                REQUIRE(p < s.row_offsets()[static_cast<std::size_t>(i) + 1]);
                REQUIRE(s.col_indices()[static_cast<std::size_t>(p)] == j);
            }
    }
}
