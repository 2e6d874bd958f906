// Tests of the narrow key blocks of the fused sparse backward
// (sparse/src/kernels/tile/narrow_chunk.hpp): global keys, which row_blocks puts in a block of
// their own (a block of heavy rows closes at the first light row), computed pair by pair with the
// queries as lanes. Against the double reference over windows, BigBird and random keys with global
// ones, shapes with n_q != n_k, grouped heads (the block's sums carried across the heads of its
// group), and a non-finite Q row that only one key of the block sees. With dense inputs these
// blocks fold into pass 0 (folded_test.cpp); here K is given as sparse input holding every entry,
// which keeps them in pass A's narrow path.

#include "brute_force.hpp"
#include "kernel_case.hpp"

#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
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

/// The keys of the first block of Omega^T under row blocks of `rows` (the backward's first key
/// block).
std::int64_t first_key_block(const Support& s, std::int64_t rows) {
    const std::vector<std::int64_t> bounds = ioattn::sparse::row_blocks(s.transposed(), rows);
    return bounds.size() > 1 ? bounds[1] - bounds[0] : 0;
}

/// backward_fused on c with K given as sparse input (every entry stored): the narrow path.
template <typename T>
void narrow_backward(Case<T>& c, const Support& s, const Tiling& t) {
    const ioattn::sparse::SparseRows<T> k = ioattn::sparse::test::all_stored(c.k, c.p.d);
    auto a = c.backward();
    a.k.data = nullptr;
    ioattn::sparse::SparseInputs<T> in;
    in.k = &k;
    NullCounter io;
    ioattn::sparse::backward_fused(a, s, in, t, MemoryModel{1 << 22}, io);
}

} // namespace

TEST_CASE("sparse row_blocks: a block of heavy rows closes at the first light row",
          "[sparse][backward][narrow]") {
    // global:G makes rows 0..G-1 of Omega^T heavy; the window's keys after them are light and
    // the budget (4 * rows * mean pairs) would have room for several of them
    for (const std::int64_t g : {1, 2, 3}) {
        CAPTURE(g);
        const Support s =
            ioattn::sparse::parse_pattern("global:" + std::to_string(g) + "+window:6", 200, 230, 3);
        CHECK(first_key_block(s, 64) == g);
        CHECK(first_key_block(s, 48) == g);
    }
    // no heavy row: blocks of `rows`
    CHECK(first_key_block(ioattn::sparse::parse_pattern("window:6", 200, 230, 3), 64) == 64);
}

TEMPLATE_TEST_CASE("sparse backward_fused: narrow key blocks of global keys",
                   "[sparse][backward][narrow]",
                   float,
                   double) {
    const std::vector<std::string> specs = {"global:1+window:3",
                                            "global:2+window:6",
                                            "bigbird:6:2:2",
                                            "global:3+random:0.05",
                                            "global:2+window:4&causal"};
    const std::vector<Tiling> tilings = {
        {Schedule::fused, 64, 128}, {Schedule::fused, 64, 40}, {Schedule::fused, 16, 33}};
    for (const auto& [n_q, n_k] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{200, 230}, {230, 200}, {77, 77}}) {
        const Problem p = ioattn::sparse::test::backward_shape(n_q, n_k, 7);
        for (const Tiling& t : tilings)
            for (const std::string& spec : specs) {
                CAPTURE(spec, n_q, n_k, t.rows, t.cols);
                const Support s = ioattn::sparse::parse_pattern(spec, n_q, n_k, 3);
                REQUIRE(first_key_block(s, t.rows) <= 3); // the narrow path runs
                ioattn::sparse::test::check_backward_agrees<TestType>(
                    p, s, 5, [&](Case<TestType>& c, const Support& sup) {
                        narrow_backward(c, sup, t);
                    });
            }
    }
}

TEMPLATE_TEST_CASE("sparse backward_fused: a narrow key block keeps a non-finite Q row from the "
                   "key that does not see it",
                   "[sparse][backward][narrow]",
                   float,
                   double) {
    REQUIRE(first_key_block(ioattn::sparse::test::global_keys_but_one_query(), 64) == 2);
    ioattn::sparse::test::check_global_key_hides_nonfinite_query<TestType>(
        [](Case<TestType>& c, const Support& s) {
            narrow_backward(c, s, Tiling{Schedule::fused, 64, 64});
        });
}
