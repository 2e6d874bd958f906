// ioattn::sparse::union_of / intersection_of: row-wise merges of two supports of the same
// shape (std::set_union / std::set_intersection on each row's sorted keys).
// O(n_q + Z_a + Z_b) time, serial.
// Tests: tests/sparse/set_ops_test.cpp

#include "patterns/pattern_util.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <iterator>

namespace ioattn::sparse {

namespace {

void check_same_shape(std::string_view where, const Support& a, const Support& b) {
    if (a.n_q() != b.n_q() || a.n_k() != b.n_k())
        detail::fail(
            where, "shapes differ: ", a.n_q(), " x ", a.n_k(), " and ", b.n_q(), " x ", b.n_k());
}

} // namespace

Support union_of(const Support& a, const Support& b) {
    constexpr std::string_view kWhere = "ioattn::sparse::union_of";
    check_same_shape(kWhere, a, b);
    return detail::build_rows(
        kWhere, a.n_q(), a.n_k(), [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            const auto ra = a.row(i);
            const auto rb = b.row(i);
            std::set_union(ra.begin(), ra.end(), rb.begin(), rb.end(), std::back_inserter(cols));
        });
}

Support intersection_of(const Support& a, const Support& b) {
    constexpr std::string_view kWhere = "ioattn::sparse::intersection_of";
    check_same_shape(kWhere, a, b);
    return detail::build_rows(
        kWhere, a.n_q(), a.n_k(), [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            const auto ra = a.row(i);
            const auto rb = b.row(i);
            std::set_intersection(
                ra.begin(), ra.end(), rb.begin(), rb.end(), std::back_inserter(cols));
        });
}

} // namespace ioattn::sparse
