// Tests of ioattn::sparse::z_input / dense_nonzeros (sparse/src/z_input.cpp): DESIGN.md 2.3.

#include <ioattn/error.hpp>
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
