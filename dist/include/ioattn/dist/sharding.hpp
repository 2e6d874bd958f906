#pragma once
/// Sequence sharding: which rows of a sequence of n rows each of P ranks holds (docs/design.md
/// section 12.4). Contiguous: rank r holds the r-th of P nearly equal chunks. Zigzag: the sequence
/// is cut into 2P nearly equal chunks and rank r holds chunks r and 2P-1-r, so that under a causal
/// mask every rank does the same work. Chunk sizes differ by at most one row (the first n mod k
/// chunks of k are one row longer), so n need not be divisible by P.

#include <cstdint>
#include <string_view>
#include <vector>

namespace ioattn::dist {

/// How a sequence is cut into per-rank shards.
enum class Layout {
    contiguous, ///< rank r holds chunk r of P
    zigzag      ///< rank r holds chunks r and 2P-1-r of 2P
};

std::string_view to_string(Layout layout);

/// Parses "contiguous" or "zigzag"; throws InvalidArgument otherwise.
Layout parse_layout(std::string_view text);

/// A half-open range [begin, end) of global row indices.
struct Range {
    std::int64_t begin = 0;
    std::int64_t end = 0;

    [[nodiscard]] std::int64_t size() const { return end - begin; }

    bool operator==(const Range&) const = default;
};

/// The shards of a sequence of n rows over `ranks` ranks. A value: cheap to copy, no MPI.
class Sharding {
public:
    /// Throws InvalidArgument naming the values unless ranks >= 1 and every rank holds at least
    /// one row (n >= ranks for contiguous, n >= 2 ranks for zigzag).
    Sharding(Layout layout, std::int64_t n, int ranks);

    [[nodiscard]] Layout layout() const { return layout_; }

    [[nodiscard]] std::int64_t n() const { return n_; }

    [[nodiscard]] int ranks() const { return ranks_; }

    /// The global ranges rank r holds, in its local order (contiguous: one range; zigzag: chunk
    /// r, then chunk 2P-1-r). Local row 0 is the first row of the first range.
    /// Precondition: 0 <= rank < ranks() (throws InvalidArgument otherwise).
    [[nodiscard]] std::vector<Range> ranges(int rank) const;

    /// Number of rows rank r holds.
    [[nodiscard]] std::int64_t rows(int rank) const;

    /// The most rows any rank holds.
    [[nodiscard]] std::int64_t max_rows() const;

    /// The rank holding global row i (0 <= i < n, throws InvalidArgument otherwise).
    [[nodiscard]] int owner(std::int64_t i) const;

    /// The global row of rank r's local row `local` (0 <= local < rows(r)).
    [[nodiscard]] std::int64_t global_row(int rank, std::int64_t local) const;

    /// The local index on rank r of global row i; throws InvalidArgument unless r holds i.
    [[nodiscard]] std::int64_t local_row(int rank, std::int64_t i) const;

    bool operator==(const Sharding&) const = default;

private:
    [[nodiscard]] Range chunk(std::int64_t c) const;
    [[nodiscard]] std::int64_t chunks() const;
    void check_rank(int rank, const char* where) const;

    Layout layout_ = Layout::contiguous;
    std::int64_t n_ = 0;
    int ranks_ = 1;
};

} // namespace ioattn::dist
