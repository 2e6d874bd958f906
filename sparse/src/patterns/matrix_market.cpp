// ioattn::sparse::read_matrix_market / write_matrix_market: Matrix Market coordinate files
// as supports, read through SuiteSparse.
// Read: scan_matrix_market checks every line (and reports the line of the first problem);
// then CHOLMOD's cholmod_l_read_triplet parses the now well-formed file; the triplets
// (mirrored if symmetric) are sorted and deduplicated into CSR. O(E log E) time for E entries.
// Write: one pattern line per allowed pair, rows in order. O(Z_QK).
// Tests: tests/sparse/matrix_market_test.cpp

#include "fail.hpp"
#include "patterns/matrix_market_scan.hpp"

#include <ioattn/error.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/matrix_market.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <suitesparse/cholmod.h>

namespace ioattn::sparse {

namespace {

constexpr std::string_view kRead = "ioattn::sparse::read_matrix_market";

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

/// cholmod_l_start / cholmod_l_finish around a Common that prints nothing.
class Cholmod {
public:
    Cholmod() {
        cholmod_l_start(&common_);
        common_.print = 0;
        common_.error_handler = nullptr;
    }

    ~Cholmod() { cholmod_l_finish(&common_); }

    Cholmod(const Cholmod&) = delete;
    Cholmod& operator=(const Cholmod&) = delete;

    cholmod_common* common() { return &common_; }

private:
    cholmod_common common_{};
};

/// The (row, column) pairs of the file, 0-based, through CHOLMOD.
std::vector<std::pair<std::int64_t, std::int64_t>>
read_pairs(std::string_view path, const detail::MatrixMarketInfo& info) {
    const std::string p(path);
    const std::unique_ptr<std::FILE, FileCloser> file(std::fopen(p.c_str(), "r"));
    if (!file)
        detail::fail(kRead, "cannot open '", path, "'");
    Cholmod cm;
    cholmod_triplet* t = cholmod_l_read_triplet(file.get(), cm.common());
    if (t == nullptr)
        detail::fail(
            kRead, path, ": CHOLMOD could not read the file (status ", cm.common()->status, ")");
    const auto* ti = static_cast<const SuiteSparse_long*>(t->i);
    const auto* tj = static_cast<const SuiteSparse_long*>(t->j);
    const auto nnz = static_cast<std::int64_t>(t->nnz);
    const bool shape_ok = static_cast<std::int64_t>(t->nrow) == info.rows &&
                          static_cast<std::int64_t>(t->ncol) == info.cols;
    std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
    pairs.reserve(static_cast<std::size_t>(t->stype != 0 ? 2 * nnz : nnz));
    bool in_range = true;
    for (std::int64_t e = 0; e < nnz; ++e) {
        const std::int64_t i = ti[e];
        const std::int64_t j = tj[e];
        in_range = in_range && i >= 0 && i < info.rows && j >= 0 && j < info.cols;
        pairs.emplace_back(i, j);
        if (t->stype != 0 && i != j)
            pairs.emplace_back(j, i); // symmetric: CHOLMOD keeps one triangle
    }
    cholmod_l_free_triplet(&t, cm.common());
    IOATTN_CHECK(shape_ok && in_range && nnz == info.entries,
                 "ioattn::sparse::read_matrix_market: CHOLMOD and the scan disagree on " + p);
    return pairs;
}

} // namespace

Support read_matrix_market(std::string_view path) {
    const detail::MatrixMarketInfo info = detail::scan_matrix_market(kRead, path);
    // row offsets; CHOLMOD's workspace of rows + cols integers (cholmod_l_read_triplet's row and
    // column degrees, allocated whatever the field); per entry CHOLMOD's triplet (i, j, x), two
    // mirrored pairs, a column index
    require_memory(kRead,
                   add_bytes(add_bytes(bytes_of(info.rows + 1, sizeof(std::int64_t)),
                                       bytes_of(info.rows + info.cols, sizeof(std::int64_t))),
                             bytes_of(info.entries, 8 * sizeof(std::int64_t))),
                   "support of a " + std::to_string(info.rows) + " x " + std::to_string(info.cols) +
                       " file");
    if (info.entries == 0)
        return Support::none(info.rows, info.cols);
    auto pairs = read_pairs(path, info);
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(info.rows) + 1, 0);
    std::vector<std::int64_t> cols;
    cols.reserve(pairs.size());
    for (const auto& [i, j] : pairs) {
        ++offsets[static_cast<std::size_t>(i) + 1];
        cols.push_back(j);
    }
    for (std::size_t r = 0; r + 1 < offsets.size(); ++r)
        offsets[r + 1] += offsets[r];
    return {info.rows, info.cols, std::move(offsets), std::move(cols)};
}

void write_matrix_market(std::string_view path, const Support& support) {
    constexpr std::string_view kWhere = "ioattn::sparse::write_matrix_market";
    std::ofstream out{std::string(path)};
    if (!out)
        detail::fail(kWhere, "cannot open '", path, "' for writing");
    out << "%%MatrixMarket matrix coordinate pattern general\n"
        << "% ioattn support: rows are queries, columns are keys\n"
        << support.n_q() << ' ' << support.n_k() << ' ' << support.z_qk() << '\n';
    for (std::int64_t i = 0; i < support.n_q(); ++i)
        for (const std::int64_t j : support.row(i))
            out << i + 1 << ' ' << j + 1 << '\n';
    out.flush();
    if (!out)
        detail::fail(kWhere, "writing '", path, "' failed");
}

} // namespace ioattn::sparse
