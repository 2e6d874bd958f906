// ioattn::dist::Sharding: the contiguous and zigzag cuts of a sequence over P ranks.

#include <ioattn/dist/sharding.hpp>
#include <ioattn/error.hpp>

#include <string>

namespace ioattn::dist {

std::string_view to_string(Layout layout) {
    return layout == Layout::zigzag ? "zigzag" : "contiguous";
}

Layout parse_layout(std::string_view text) {
    if (text == "contiguous")
        return Layout::contiguous;
    if (text == "zigzag")
        return Layout::zigzag;
    throw InvalidArgument("ioattn::dist::parse_layout: '" + std::string(text) +
                          "' (expected contiguous or zigzag)");
}

Sharding::Sharding(Layout layout, std::int64_t n, int ranks)
    : layout_(layout)
    , n_(n)
    , ranks_(ranks) {
    if (ranks < 1)
        throw InvalidArgument("ioattn::dist::Sharding: ranks = " + std::to_string(ranks) +
                              " (expected >= 1)");
    if (n < chunks())
        throw InvalidArgument("ioattn::dist::Sharding: n = " + std::to_string(n) + " rows over " +
                              std::to_string(ranks) + " ranks, " + std::string(to_string(layout)) +
                              " (expected n >= " + std::to_string(chunks()) +
                              ": every rank holds at least one row of every chunk)");
}

std::int64_t Sharding::chunks() const {
    return layout_ == Layout::zigzag ? 2 * std::int64_t{ranks_} : std::int64_t{ranks_};
}

Range Sharding::chunk(std::int64_t c) const {
    const std::int64_t k = chunks();
    const std::int64_t base = n_ / k;
    const std::int64_t extra = n_ % k;
    const std::int64_t begin = c * base + (c < extra ? c : extra);
    return {begin, begin + base + (c < extra ? 1 : 0)};
}

void Sharding::check_rank(int rank, const char* where) const {
    if (rank < 0 || rank >= ranks_)
        throw InvalidArgument(std::string("ioattn::dist::Sharding::") + where + ": rank " +
                              std::to_string(rank) + " (expected 0 <= rank < " +
                              std::to_string(ranks_) + ")");
}

std::vector<Range> Sharding::ranges(int rank) const {
    check_rank(rank, "ranges");
    if (layout_ == Layout::contiguous)
        return {chunk(rank)};
    return {chunk(rank), chunk(2 * std::int64_t{ranks_} - 1 - rank)};
}

std::int64_t Sharding::rows(int rank) const {
    std::int64_t total = 0;
    for (const Range& r : ranges(rank))
        total += r.size();
    return total;
}

std::int64_t Sharding::max_rows() const {
    std::int64_t most = 0;
    for (int r = 0; r < ranks_; ++r) {
        const std::int64_t m = rows(r);
        most = m > most ? m : most;
    }
    return most;
}

int Sharding::owner(std::int64_t i) const {
    if (i < 0 || i >= n_)
        throw InvalidArgument("ioattn::dist::Sharding::owner: row " + std::to_string(i) +
                              " (expected 0 <= row < " + std::to_string(n_) + ")");
    const std::int64_t k = chunks();
    const std::int64_t base = n_ / k;
    const std::int64_t extra = n_ % k;
    const std::int64_t long_rows = extra * (base + 1);
    const std::int64_t c = i < long_rows ? i / (base + 1) : extra + (i - long_rows) / base;
    return static_cast<int>(c < ranks_ ? c : k - 1 - c);
}

std::int64_t Sharding::global_row(int rank, std::int64_t local) const {
    for (const Range& r : ranges(rank)) {
        if (local >= 0 && local < r.size())
            return r.begin + local;
        local -= r.size();
    }
    throw InvalidArgument("ioattn::dist::Sharding::global_row: local row out of range for rank " +
                          std::to_string(rank));
}

std::int64_t Sharding::local_row(int rank, std::int64_t i) const {
    std::int64_t local = 0;
    for (const Range& r : ranges(rank)) {
        if (i >= r.begin && i < r.end)
            return local + i - r.begin;
        local += r.size();
    }
    throw InvalidArgument("ioattn::dist::Sharding::local_row: rank " + std::to_string(rank) +
                          " does not hold row " + std::to_string(i));
}

} // namespace ioattn::dist
