#pragma once
// Private helpers of the pattern builders: row-by-row CSR assembly, shape checks, and the
// counter-based random generator the seeded patterns use.

#include "fail.hpp"

#include <ioattn/resources.hpp>
#include <ioattn/sparse/support.hpp>

#include <algorithm>
#include <cstdint>
#include <new>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ioattn::sparse::detail {

/// Throws unless v >= min, naming the parameter.
inline void
check_at_least(std::string_view where, const char* name, std::int64_t v, std::int64_t min) {
    if (v < min)
        fail(where, name, " = ", v, " (expected >= ", min, ")");
}

/// floor(a / b) for b >= 1.
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// Throws unless n_q >= 0 and n_k >= 0.
inline void check_shape(std::string_view where, std::int64_t n_q, std::int64_t n_k) {
    if (n_q < 0)
        fail(where, "n_q = ", n_q, " (expected >= 0)");
    if (n_k < 0)
        fail(where, "n_k = ", n_k, " (expected >= 0)");
}

/// Assembles a Support from row_fn(i, cols), which appends row i's sorted unique columns.
/// Throws ResourceError naming `where` as soon as the columns outgrow memory_limit() (the
/// builders know their size only row by row) or an allocation fails.
template <typename RowFn>
Support build_rows(std::string_view where, std::int64_t n_q, std::int64_t n_k, RowFn&& row_fn) {
    constexpr std::string_view kWhat = "support (CSR column indices and row offsets)";
    const std::uint64_t limit = memory_limit().bytes;
    const std::uint64_t offset_bytes =
        add_bytes(bytes_of(n_q, sizeof(std::int64_t)), sizeof(std::int64_t)); // n_q + 1 offsets
    require_memory(where, offset_bytes, kWhat);
    try {
        std::vector<std::int64_t> offsets;
        offsets.reserve(static_cast<std::size_t>(n_q) + 1);
        offsets.push_back(0);
        std::vector<std::int64_t> cols;
        for (std::int64_t i = 0; i < n_q; ++i) {
            row_fn(i, cols);
            offsets.push_back(static_cast<std::int64_t>(cols.size()));
            const std::uint64_t bytes = add_bytes(offset_bytes, cols.size() * sizeof(std::int64_t));
            if (bytes > limit) // at least this much: the later rows are not built yet
                require_memory(where,
                               bytes,
                               std::string(kWhat) + " for rows 0.." + std::to_string(i) + " of " +
                                   std::to_string(n_q));
        }
        return {n_q, n_k, std::move(offsets), std::move(cols)};
    } catch (const std::bad_alloc&) {
        throw_allocation_failed(where, offset_bytes, kWhat);
    }
}

/// Appends [lo, hi] clipped to [0, n), if non-empty.
inline void
append_range(std::vector<std::int64_t>& cols, std::int64_t lo, std::int64_t hi, std::int64_t n) {
    lo = std::max<std::int64_t>(lo, 0);
    hi = std::min<std::int64_t>(hi, n - 1);
    if (hi < lo)
        return;
    const std::size_t old = cols.size();
    cols.resize(old + static_cast<std::size_t>(hi - lo + 1));
    std::iota(cols.begin() + static_cast<std::ptrdiff_t>(old), cols.end(), lo);
}

/// SplitMix64 (Steele, Lea, Flood 2014): the state's increment and its finaliser's multipliers
/// (geometric_gaps.cpp applies the finaliser to vectors of states).
inline constexpr std::uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;
inline constexpr std::uint64_t kSplitMixMul1 = 0xbf58476d1ce4e5b9ULL;
inline constexpr std::uint64_t kSplitMixMul2 = 0x94d049bb133111ebULL;

/// SplitMix64 step: the finaliser of x + gamma; used to derive stream seeds, and RowRng's draws.
inline std::uint64_t mix64(std::uint64_t x) {
    x += kSplitMixGamma;
    x = (x ^ (x >> 30U)) * kSplitMixMul1;
    x = (x ^ (x >> 27U)) * kSplitMixMul2;
    return x ^ (x >> 31U);
}

/// A small deterministic generator (SplitMix64 stream) for one row or row block. Its output
/// depends only on (seed, salt, index), never on threads or the standard library.
class RowRng {
public:
    RowRng(std::uint64_t seed, std::uint64_t salt, std::int64_t index)
        : state_(mix64(seed ^ mix64(salt ^ mix64(static_cast<std::uint64_t>(index))))) {}

    std::uint64_t next() {
        const std::uint64_t z = mix64(state_); // the finaliser of the state advanced by gamma
        state_ += kSplitMixGamma;
        return z;
    }

    /// Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11U) * 0x1.0p-53; }

    /// Skips the next n draws and returns the state before them: draw k of them (from 0) is the
    /// finaliser of state + (k + 1) kSplitMixGamma, which a vector of lanes can make side by side.
    std::uint64_t skip(std::uint64_t n) {
        const std::uint64_t before = state_;
        state_ += n * kSplitMixGamma;
        return before;
    }

    /// Uniform in [0, n), n >= 1 (division with rejection: unbiased).
    std::int64_t below(std::int64_t n) {
        const auto un = static_cast<std::uint64_t>(n);
        const std::uint64_t bucket = ~std::uint64_t{0} / un;
        const std::uint64_t limit = bucket * un;
        std::uint64_t r = next();
        while (r >= limit)
            r = next();
        return static_cast<std::int64_t>(r / bucket);
    }

private:
    std::uint64_t state_;
};

/// r distinct values of [0, avail), r < avail, drawn by Floyd's algorithm from rng, written to
/// out ascending (out's storage reused). The draws are the algorithm's whatever holds the
/// chosen values: a few are looked up in out itself (bigbird's 3 a row; an unordered_set per
/// row, its buckets and nodes allocated, was most of bigbird:64:2:3's build), more in a set.
inline void
floyd_sample(RowRng& rng, std::int64_t avail, std::int64_t r, std::vector<std::int64_t>& out) {
    out.clear();
    constexpr std::int64_t kScanned = 64; // above it a lookup scans more than it hashes
    if (r <= kScanned) {
        for (std::int64_t top = avail - r; top < avail; ++top) {
            const std::int64_t t = rng.below(top + 1);
            out.push_back(std::find(out.begin(), out.end(), t) != out.end() ? top : t);
        }
    } else {
        std::unordered_set<std::int64_t> chosen;
        chosen.reserve(static_cast<std::size_t>(2 * r));
        for (std::int64_t top = avail - r; top < avail; ++top) {
            const std::int64_t t = rng.below(top + 1);
            const std::int64_t pick = chosen.contains(t) ? top : t;
            chosen.insert(pick);
            out.push_back(pick);
        }
    }
    std::sort(out.begin(), out.end());
}

/// gaps[k] = geometric_skip(u[k], log_keep, inverse) (fast_floors.hpp) for kGapBatch draws u,
/// drawn first from rng when it is given: the active ISA target's geometric_gaps
/// (patterns/geometric_gaps.cpp), found once.
using GeometricGaps =
    void (*)(RowRng* rng, double* u, double log_keep, double inverse, double* gaps);
GeometricGaps geometric_gaps_kernel();

/// The active ISA target's geometric_keys (patterns/geometric_gaps.hpp), found once.
using GeometricKeys = std::int64_t (*)(RowRng* rng,
                                       double* u,
                                       double log_keep,
                                       double inverse,
                                       std::int64_t j,
                                       std::int64_t n_k,
                                       std::int64_t* keys);
GeometricKeys geometric_keys_kernel();

} // namespace ioattn::sparse::detail
