// Fuzz target: ioattn::sparse::SparseRows, float or double (the first byte decides): the CSR
// validator on near-valid structures, and from_dense_threshold / from_dense_top_k on dense
// matrices with any values (NaN, infinities, zeros, ties) and any sizes (huge ones included).
// Every input either throws ioattn::Error or gives rows whose to_dense() matches the input:
// threshold keeps exactly |x| > t; top-k keeps at most k non-zeros per row, the largest |x|
// with ties to the lower column. Seeds: corpus/sparse_rows_fuzz.

#include "fuzz_util.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/sparse_rows.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

namespace {

namespace sp = ioattn::sparse;

std::int64_t size_of(FuzzedDataProvider& in, std::int64_t hi) {
    return in.ConsumeIntegralInRange<int>(0, 15) == 0
               ? in.ConsumeIntegral<std::int64_t>()
               : in.ConsumeIntegralInRange<std::int64_t>(-1, hi);
}

template <typename T>
T value_of(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
        return T(0);
    case 1:
        return T(-1); // ties
    default:
        return in.ConsumeFloatingPoint<T>();
    }
}

template <typename T>
void check_rows(const sp::SparseRows<T>& r) {
    std::int64_t stored = 0;
    for (std::int64_t i = 0; i < r.rows(); ++i) {
        const auto idx = r.row_indices(i);
        FUZZ_CHECK(idx.size() == r.row_values(i).size());
        for (std::size_t e = 0; e < idx.size(); ++e)
            FUZZ_CHECK(idx[e] >= 0 && idx[e] < r.cols() && (e == 0 || idx[e - 1] < idx[e]));
        stored += static_cast<std::int64_t>(idx.size());
    }
    FUZZ_CHECK(stored == r.nonzeros());
}

template <typename T>
void validator(FuzzedDataProvider& in) {
    const std::int64_t rows = in.ConsumeIntegralInRange<std::int64_t>(-1, 12);
    const std::int64_t cols = size_of(in, 12);
    std::vector<std::int64_t> offsets{0}, idx;
    std::vector<T> val;
    for (std::int64_t i = 0; i < rows + in.ConsumeIntegralInRange<int>(-1, 1); ++i) {
        std::int64_t c = -1;
        for (int n = in.ConsumeIntegralInRange<int>(0, 4); n > 0; --n) {
            c += in.ConsumeIntegralInRange<int>(0, 4) == 0 ? -1 : in.ConsumeIntegralInRange(1, 3);
            idx.push_back(c);
            val.push_back(value_of<T>(in));
        }
        offsets.push_back(static_cast<std::int64_t>(idx.size()) + in.ConsumeIntegralInRange(0, 1) -
                          in.ConsumeIntegralInRange(0, 1));
    }
    if (in.ConsumeBool() && !val.empty())
        val.pop_back();
    try {
        const sp::SparseRows<T> r(rows, cols, offsets, idx, val);
        check_rows(r);
        const std::vector<T> dense = r.to_dense();
        FUZZ_CHECK(static_cast<std::int64_t>(dense.size()) == r.rows() * r.cols());
    } catch (const ioattn::Error&) {
    }
}

template <typename T>
void from_dense(FuzzedDataProvider& in) {
    const std::int64_t rows = size_of(in, 8), cols = size_of(in, 8);
    std::vector<T> dense(in.ConsumeIntegralInRange<std::size_t>(0, 80));
    for (T& x : dense)
        x = value_of<T>(in);
    const T threshold = in.ConsumeBool() ? T(0) : value_of<T>(in);
    const std::int64_t k = size_of(in, 9);
    const std::span<const T> view(dense);
    try {
        const auto r = sp::SparseRows<T>::from_dense_threshold(view, rows, cols, threshold);
        check_rows(r);
        const std::vector<T> back = r.to_dense();
        for (std::size_t e = 0; e < dense.size(); ++e)
            FUZZ_CHECK(back[e] == (std::abs(dense[e]) > threshold ? dense[e] : T(0)));
    } catch (const ioattn::Error&) {
    }
    try {
        const auto r = sp::SparseRows<T>::from_dense_top_k(view, rows, cols, k);
        check_rows(r);
        for (std::int64_t i = 0; i < r.rows(); ++i) {
            const auto idx = r.row_indices(i);
            FUZZ_CHECK(static_cast<std::int64_t>(idx.size()) <= k);
            std::vector<bool> kept(static_cast<std::size_t>(cols), false);
            for (std::size_t e = 0; e < idx.size(); ++e) {
                FUZZ_CHECK(r.row_values(i)[e] ==
                           dense[static_cast<std::size_t>(i * cols + idx[e])]);
                FUZZ_CHECK(r.row_values(i)[e] != T(0));
                kept[static_cast<std::size_t>(idx[e])] = true;
            }
            for (std::int64_t j = 0; j < cols; ++j) { // nothing left out beats what was kept
                const T y = std::abs(dense[static_cast<std::size_t>(i * cols + j)]);
                if (kept[static_cast<std::size_t>(j)] || y == T(0))
                    continue;
                FUZZ_CHECK(static_cast<std::int64_t>(idx.size()) == k);
                for (const std::int64_t c : idx) {
                    const T x = std::abs(dense[static_cast<std::size_t>(i * cols + c)]);
                    FUZZ_CHECK(x > y || (x == y && c < j));
                }
            }
        }
    } catch (const ioattn::Error&) {
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    ioattn::fuzz::init();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider in(data, size);
    const bool is_double = in.ConsumeBool();
    const bool dense = in.ConsumeBool();
    if (is_double)
        dense ? from_dense<double>(in) : validator<double>(in);
    else
        dense ? from_dense<float>(in) : validator<float>(in);
    return 0;
}
