// Fuzz target: the CSR validator of ioattn::sparse::Support and what a valid support offers.
// The input encodes n_q, n_k (small, or any int64), offsets (a running sum of small row lengths
// with occasional breaks) and columns (increasing runs with occasional breaks), so that both
// valid and nearly valid structures reach the constructor. Every input either throws
// InvalidArgument or gives a support whose rows are sorted, unique and in range, whose
// contains() agrees with its rows, whose transpose transposes back, and whose tile views (any
// Br, Bc >= 1, huge ones included) count every pair once. Seeds: corpus/support_fuzz.

#include "fuzz_util.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/support.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

namespace {

namespace sp = ioattn::sparse;

std::int64_t any_or_small(FuzzedDataProvider& in, std::int64_t lo, std::int64_t hi) {
    return in.ConsumeIntegralInRange<int>(0, 15) == 0 ? in.ConsumeIntegral<std::int64_t>()
                                                      : in.ConsumeIntegralInRange(lo, hi);
}

/// Checks what a valid support promises.
void check_valid(const sp::Support& s, FuzzedDataProvider& in) {
    std::int64_t pairs = 0, empty = 0;
    for (std::int64_t i = 0; i < s.n_q(); ++i) {
        const auto row = s.row(i);
        empty += row.empty() ? 1 : 0;
        for (std::size_t e = 0; e < row.size(); ++e) {
            FUZZ_CHECK(row[e] >= 0 && row[e] < s.n_k());
            FUZZ_CHECK(e == 0 || row[e - 1] < row[e]);
            FUZZ_CHECK(s.contains(i, row[e]));
            ++pairs;
        }
    }
    FUZZ_CHECK(pairs == s.z_qk());
    FUZZ_CHECK(empty == s.empty_rows());
    FUZZ_CHECK(!s.contains(-1, 0) && !s.contains(s.n_q(), 0) && !s.contains(0, s.n_k()));
    try {
        const sp::Support& t = s.transposed();
        FUZZ_CHECK(t.n_q() == s.n_k() && t.n_k() == s.n_q() && t.z_qk() == s.z_qk());
        FUZZ_CHECK(t.transposed() == s);
        const auto pos = s.transposed_positions();
        FUZZ_CHECK(static_cast<std::int64_t>(pos.size()) == s.z_qk());
    } catch (const ioattn::ResourceError&) { // n_k keys of offsets beyond the budget
    }
    const std::int64_t br = any_or_small(in, 1, 9), bc = any_or_small(in, 1, 9);
    try {
        const sp::BlockView v = s.block_view(br, bc);
        std::int64_t counted = 0;
        for (std::int64_t b = 0; b < v.row_blocks; ++b)
            for (const sp::BlockTile& tile : v.tiles_of(b)) {
                FUZZ_CHECK(tile.nonzeros >= 1 && tile.col_block < v.col_blocks);
                counted += tile.nonzeros;
            }
        FUZZ_CHECK(counted == s.z_qk());
    } catch (const ioattn::InvalidArgument&) { // Br or Bc < 1
        FUZZ_CHECK(br < 1 || bc < 1);
    } catch (const ioattn::ResourceError&) {
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    ioattn::fuzz::init();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider in(data, size);
    const std::int64_t n_q = in.ConsumeIntegralInRange<std::int64_t>(-1, 40);
    const std::int64_t n_k = any_or_small(in, -1, 40);
    // n_q + 1 offsets, now and then one fewer or one more
    std::size_t n_offsets = n_q < 0 ? 0 : static_cast<std::size_t>(n_q) + 1;
    const int size_error = in.ConsumeIntegralInRange<int>(0, 7);
    if (size_error == 1 && n_offsets > 0)
        --n_offsets;
    else if (size_error == 2)
        ++n_offsets;
    std::vector<std::int64_t> offsets;
    std::int64_t at =
        in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegralInRange(-2, 2) : 0;
    for (std::size_t r = 0; r < n_offsets; ++r) {
        offsets.push_back(any_or_small(in, at, at)); // now and then any value instead
        at += in.ConsumeIntegralInRange<std::int64_t>(-1, 6);
    }
    std::vector<std::int64_t> cols;
    const std::int64_t z = offsets.empty() ? 0 : offsets.back();
    const std::int64_t n_cols = std::max<std::int64_t>(0, std::min<std::int64_t>(z, 400)) +
                                in.ConsumeIntegralInRange<std::int64_t>(-1, 1);
    std::int64_t col = -1;
    for (std::int64_t e = 0; e < n_cols; ++e) {
        const int step = in.ConsumeIntegralInRange<int>(-2, 5);
        col = step <= 0 ? (step == 0 ? col : in.ConsumeIntegralInRange<std::int64_t>(-1, 41))
                        : col + step;
        cols.push_back(col);
    }
    sp::Support s;
    try {
        s = sp::Support(n_q, n_k, std::move(offsets), std::move(cols));
    } catch (const ioattn::InvalidArgument&) {
        return 0;
    }
    FUZZ_CHECK(s.n_q() == n_q && s.n_k() == n_k);
    check_valid(s, in);
    return 0;
}
