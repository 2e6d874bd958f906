#pragma once
// Test helpers: supports from membership predicates, the shapes every builder is checked on,
// and a scratch file that removes itself.

#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

namespace ioattn::sparse::test {

/// The support {(i, j) : allowed(i, j)}, by testing every pair.
template <typename Pred>
Support from_predicate(std::int64_t n_q, std::int64_t n_k, Pred allowed) {
    std::vector<std::int64_t> offsets{0};
    std::vector<std::int64_t> cols;
    for (std::int64_t i = 0; i < n_q; ++i) {
        for (std::int64_t j = 0; j < n_k; ++j)
            if (allowed(i, j))
                cols.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return {n_q, n_k, std::move(offsets), std::move(cols)};
}

/// Small shapes with n_q = n_k, n_q < n_k, n_q > n_k and degenerate ones.
inline std::vector<std::pair<std::int64_t, std::int64_t>> small_shapes() {
    return {{1, 1},
            {5, 5},
            {13, 13},
            {4, 11},
            {1, 9},
            {11, 4},
            {9, 1},
            {16, 7},
            {7, 16},
            {0, 3},
            {3, 0}};
}

/// A file in the temp directory, deleted when the object dies.
class TempFile {
public:
    TempFile(std::string_view name, std::string_view content)
        : path_(std::filesystem::temp_directory_path() /
                ("ioattn_sparse_" + std::to_string(::getpid()) + "_" + std::string(name))) {
        std::ofstream(path_, std::ios::binary) << content;
    }

    ~TempFile() {
        std::error_code ec;
        std::filesystem::remove(path_, ec);
    }

    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;

    [[nodiscard]] std::string path() const { return path_.string(); }

private:
    std::filesystem::path path_;
};

} // namespace ioattn::sparse::test
