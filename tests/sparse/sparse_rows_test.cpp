// Tests of ioattn::sparse::SparseRows (sparse/src/inputs/sparse_rows.cpp): construction checks,
// threshold and top-k against brute force, to_dense round trips.

#include <ioattn/error.hpp>
#include <ioattn/sparse/sparse_rows.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using ioattn::InvalidArgument;
using ioattn::sparse::SparseRows;

TEMPLATE_TEST_CASE("SparseRows: threshold keeps |x| > t", "[sparse_rows]", float, double) {
    std::mt19937_64 gen(3);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 1}, {5, 8}, {17, 3}, {0, 4}, {4, 0}}) {
        std::vector<TestType> dense(static_cast<std::size_t>(rows * cols));
        for (auto& x : dense)
            x = std::max(TestType(0), static_cast<TestType>(dist(gen))); // ReLU features
        for (const TestType t : {TestType(0), TestType(0.25), TestType(2)}) {
            CAPTURE(rows, cols, t);
            const auto s = SparseRows<TestType>::from_dense_threshold(dense, rows, cols, t);
            std::int64_t expected = 0;
            std::vector<TestType> kept(dense.size(), TestType(0));
            for (std::size_t e = 0; e < dense.size(); ++e)
                if (std::abs(dense[e]) > t) {
                    ++expected;
                    kept[e] = dense[e];
                }
            CHECK(s.nonzeros() == expected);
            CHECK(s.rows() == rows);
            CHECK(s.cols() == cols);
            CHECK(s.to_dense() == kept);
        }
    }
}

TEMPLATE_TEST_CASE("SparseRows: top-k keeps the k largest |x| per row",
                   "[sparse_rows]",
                   float,
                   double) {
    // row 0 has a tie (|-3| = |3|) resolved to the lower column, row 1 has zeros
    const std::vector<TestType> dense = {1, -3, 3, 0.5, 2, 0, 0, 0, -1, 0};
    const auto s = SparseRows<TestType>::from_dense_top_k(dense, 2, 5, 2);
    CHECK(std::vector<std::int64_t>(s.indices().begin(), s.indices().end()) ==
          std::vector<std::int64_t>{1, 2, 3});
    CHECK(std::vector<TestType>(s.values().begin(), s.values().end()) ==
          std::vector<TestType>{-3, 3, -1});
    CHECK(std::vector<std::int64_t>(s.offsets().begin(), s.offsets().end()) ==
          std::vector<std::int64_t>{0, 2, 3});
    CHECK(SparseRows<TestType>::from_dense_top_k(dense, 2, 5, 0).nonzeros() == 0);
    CHECK(SparseRows<TestType>::from_dense_top_k(dense, 2, 5, 5).to_dense() == dense);

    std::mt19937_64 gen(5);
    std::normal_distribution<double> dist;
    const std::int64_t rows = 9;
    const std::int64_t cols = 16;
    std::vector<TestType> x(static_cast<std::size_t>(rows * cols));
    for (auto& v : x)
        v = static_cast<TestType>(dist(gen));
    for (const std::int64_t k : {1, 4, 16}) {
        const auto t = SparseRows<TestType>::from_dense_top_k(x, rows, cols, k);
        CHECK(t.nonzeros() == rows * k);
        for (std::int64_t i = 0; i < rows; ++i) {
            std::vector<TestType> mags;
            for (std::int64_t j = 0; j < cols; ++j)
                mags.push_back(std::abs(x[static_cast<std::size_t>(i * cols + j)]));
            std::sort(mags.begin(), mags.end());
            const TestType kth = mags[static_cast<std::size_t>(cols - k)];
            for (const TestType v : t.row_values(i))
                CHECK(std::abs(v) >= kth);
        }
    }
}

TEST_CASE("SparseRows: each malformed CSR throws", "[sparse_rows][throws]") {
    using V = std::vector<std::int64_t>;
    using D = std::vector<double>;
    const SparseRows<double> ok(2, 3, V{0, 1, 3}, V{2, 0, 1}, D{1, 2, 3});
    CHECK(ok.nonzeros() == 3);
    CHECK(ok.row_indices(1).size() == 2);
    CHECK(ok.row_values(0)[0] == 1.0);
    CHECK_THROWS_WITH(SparseRows<double>(-1, 3, V{0}, V{}, D{}), Catch::Contains("rows = -1"));
    CHECK_THROWS_WITH(SparseRows<double>(1, -3, V{0, 0}, V{}, D{}), Catch::Contains("cols = -3"));
    CHECK_THROWS_WITH(SparseRows<double>(2, 3, V{0, 1}, V{0}, D{1}),
                      Catch::Contains("expected rows + 1 = 3"));
    CHECK_THROWS_WITH(SparseRows<double>(1, 3, V{0, 1}, V{0}, D{}),
                      Catch::Contains("values has 0 entries"));
    CHECK_THROWS_WITH(SparseRows<double>(1, 3, V{1, 1}, V{0}, D{1}),
                      Catch::Contains("offsets[0] = 1"));
    CHECK_THROWS_WITH(SparseRows<double>(2, 3, V{0, 2, 1}, V{0, 1}, D{1, 2}),
                      Catch::Contains("row 1"));
    CHECK_THROWS_WITH(SparseRows<double>(1, 3, V{0, 1}, V{3}, D{1}),
                      Catch::Contains("row 0: column 3 out of range [0, 3)"));
    CHECK_THROWS_WITH(SparseRows<double>(1, 3, V{0, 2}, V{1, 1}, D{1, 1}),
                      Catch::Contains("strictly increasing"));
    CHECK_THROWS_WITH(SparseRows<double>(1, 3, V{0, 2}, V{2, 1}, D{1, 1}),
                      Catch::Contains("column 1 after column 2"));
    CHECK_THROWS_WITH(SparseRows<double>(2, 3, V{0, 1, 1}, V{0, 1}, D{1, 2}),
                      Catch::Contains("offsets[rows] = 1"));
}

TEST_CASE("SparseRows: bad dense inputs throw", "[sparse_rows][throws]") {
    const std::vector<float> dense = {1, 2, 3, 4, 5, 6};
    using S = SparseRows<float>;
    CHECK_THROWS_WITH(S::from_dense_threshold(dense, 2, 2, 0.0F),
                      Catch::Contains("from_dense_threshold") && Catch::Contains("6 elements"));
    CHECK_THROWS_WITH(S::from_dense_threshold(dense, 2, 3, -1.0F),
                      Catch::Contains("threshold = -1"));
    CHECK_THROWS_AS(S::from_dense_threshold(dense, 2, 3, std::numeric_limits<float>::quiet_NaN()),
                    InvalidArgument);
    CHECK_THROWS_WITH(S::from_dense_top_k(dense, 2, 3, 4), Catch::Contains("k = 4"));
    CHECK_THROWS_WITH(S::from_dense_top_k(dense, 2, 3, -1), Catch::Contains("k = -1"));
    CHECK_THROWS_WITH(S::from_dense_top_k(dense, -2, 3, 1), Catch::Contains("rows = -2"));
    const std::vector<float> with_nan = {1, std::numeric_limits<float>::quiet_NaN(), 3, 4};
    CHECK_THROWS_WITH(S::from_dense_top_k(with_nan, 2, 2, 1),
                      Catch::Contains("NaN at row 0, column 1"));
}

TEST_CASE("SparseRows: rows*cols past int64 is an error, not an overflow",
          "[sparse_rows][throws]") {
    // regression (sparse_rows_fuzz, corpus/sparse_rows_fuzz/regress-rows-cols-overflow):
    // 8 x 4963541883495890297 overflowed in the size check (UBSan: signed integer overflow)
    const std::vector<double> dense(8, 1.0);
    const std::int64_t huge = 4963541883495890297;
    CHECK_THROWS_WITH(SparseRows<double>::from_dense_threshold(dense, 8, huge, 0.0),
                      Catch::Contains("rows*cols = 8 x 4963541883495890297 overflows int64"));
    CHECK_THROWS_AS(SparseRows<double>::from_dense_top_k(dense, huge, 8, 1), InvalidArgument);
    const std::vector<float> one(1, 1.0F);
    CHECK_THROWS_AS(SparseRows<float>::from_dense_threshold(one, huge, huge, 0.0F),
                    InvalidArgument);
}

TEST_CASE("SparseRows: to_dense() of rows*cols past int64 is refused, not an overflow",
          "[sparse_rows][throws]") {
    // regression (sparse_rows_fuzz, corpus/sparse_rows_fuzz/regress-to-dense-overflow): a valid
    // 5 x 2351055617237491872 CSR overflowed sizing its dense copy (UBSan: signed overflow)
    const SparseRows<float> r(5, 2351055617237491872, {0, 1, 1, 1, 1, 1}, {7}, {2.0F});
    CHECK(r.nonzeros() == 1);
    CHECK_THROWS_AS(r.to_dense(), ioattn::ResourceError);
    CHECK_THROWS_WITH(r.to_dense(), Catch::Contains("SparseRows::to_dense: needs"));
}

TEST_CASE("SparseRows: huge rows with cols = 0 are refused, not a length_error",
          "[sparse_rows][throws]") {
    // regression (sparse_rows_fuzz, corpus/sparse_rows_fuzz/regress-huge-rows-zero-cols): rows
    // x 0 matches an empty dense, and reserving rows + 1 offsets threw std::length_error
    const std::vector<float> none;
    const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
    CHECK_THROWS_AS(SparseRows<float>::from_dense_threshold(none, huge, 0, 0.0F),
                    ioattn::ResourceError);
    CHECK_THROWS_AS(SparseRows<float>::from_dense_top_k(none, huge, 0, 0), ioattn::ResourceError);
    CHECK(SparseRows<float>::from_dense_threshold(none, 3, 0, 0.0F).rows() == 3);
}
