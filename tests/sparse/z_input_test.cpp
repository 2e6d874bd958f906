// Tests of ioattn::sparse::z_input / dense_nonzeros (sparse/src/inputs/z_input.cpp): docs/design.md
// section 6.2.

#include <ioattn/error.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/sparse_rows.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace sp = ioattn::sparse;
using ioattn::Pass;

TEST_CASE("z_input: dense problems give (n_q + 2 n_k) d, backward adds dO", "[z_input]") {
    ioattn::Problem p;
    p.n_q = 100;
    p.n_k = 300;
    p.d = 64;
    CHECK(sp::z_input(p, Pass::forward) == 44800);  // (100 + 2*300) * 64
    CHECK(sp::z_input(p, Pass::backward) == 51200); // + 100 * 64
    p.d_v = 32;
    CHECK(sp::z_input(p, Pass::forward) == 35200);  // 100*64 + 300*64 + 300*32
    CHECK(sp::z_input(p, Pass::backward) == 38400); // + 100 * 32
    p.n_k = 0;
    CHECK_THROWS_AS(sp::z_input(p, Pass::forward), ioattn::InvalidArgument);
}

TEST_CASE("z_input: sparse operands count their nonzeros", "[z_input]") {
    const std::vector<double> q = {0, 1, 0, 2, 0, 0}; // 2 x 3, two nonzeros
    const auto qs = sp::SparseRows<double>::from_dense_threshold(q, 2, 3, 0.0);
    const sp::InputNonzeros nnz{qs.nonzeros(),
                                sp::dense_nonzeros(4, 3),
                                sp::dense_nonzeros(4, 5),
                                sp::dense_nonzeros(2, 5)};
    CHECK(sp::z_input(nnz, Pass::forward) == 2 + 12 + 20);
    CHECK(sp::z_input(nnz, Pass::backward) == 2 + 12 + 20 + 10);
    CHECK_THROWS_WITH(sp::z_input(sp::InputNonzeros{-1, 0, 0, 0}, Pass::forward),
                      Catch::Contains("q = -1"));
    CHECK_THROWS_AS(sp::dense_nonzeros(-1, 2), ioattn::InvalidArgument);
}

TEST_CASE("used_input_words: only the rows a pattern uses are compulsory reads", "[z_input]") {
    ioattn::Problem p;
    p.heads = 2;
    p.n_q = 5;
    p.n_k = 6;
    p.d = 4;
    p.d_v = 3;
    // the dense pattern uses every row: z_input's count
    const auto all = sp::pattern_dense(5, 6);
    CHECK(sp::used_input_words(p, all, Pass::forward) == sp::z_input(p, Pass::forward));
    // query 1 sees nothing, keys 2 and 5 are seen by nobody
    const sp::Support s(5, 6, {0, 2, 2, 3, 5, 6}, {0, 1, 3, 0, 4, 1});
    CHECK(sp::used_input_words(p, s, Pass::forward) == 4 * 4 + 4 * (4 + 3));
    // the backward also reads O, dO (d_v each) and L of the used query rows
    CHECK(sp::used_input_words(p, s, Pass::backward) == 4 * (4 + 2 * 3 + 1) + 4 * (4 + 3));
    // a sparse Q counts the stored entries of its used rows, averaged over its slices: row 1
    // (unused) holds 4 entries, the used rows 1 each
    std::vector<float> q(2 * 5 * 4, 0.0F);
    for (int slice = 0; slice < 2; ++slice)
        for (int i = 0; i < 5; ++i)
            for (int z = 0; z < (i == 1 ? 4 : 1); ++z)
                q[static_cast<std::size_t>((slice * 5 + i) * 4 + z)] = 1.0F;
    const auto sq = sp::SparseRows<float>::from_dense_threshold(q, 10, 4, 0.0F);
    const sp::SparseInputs<float> in{&sq, nullptr, nullptr};
    CHECK(sp::used_input_words(p, s, in, Pass::forward) == 4 * 1 + 4 * (4 + 3));
    // the bound's compulsory term: used inputs and every output row, per head
    const ioattn::Bound b = sp::bound(p,
                                      s,
                                      ioattn::MemoryModel{64},
                                      sp::z_input(p, Pass::forward),
                                      sp::used_input_words(p, s, Pass::forward),
                                      Pass::forward);
    CHECK(b.compulsory == 2.0 * (4 * 4 + 4 * 7 + 5 * (3 + 1)));
    CHECK(sp::forward_bound(p, s, ioattn::MemoryModel{64}, sp::z_input(p, Pass::forward))
              .compulsory == b.compulsory);
    CHECK_THROWS_AS(sp::used_input_words(p, sp::pattern_dense(4, 6), Pass::forward),
                    ioattn::InvalidArgument);
}
