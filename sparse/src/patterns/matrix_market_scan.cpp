// ioattn::sparse::detail::scan_matrix_market: strict check of a Matrix Market coordinate file.
// One pass over the lines: header (object, format, field, symmetry), comments and blank
// lines, the size line, then exactly `entries` entry lines with 1-based indices in range and
// the field's number of values; anything else throws with the path and the line number.
// O(file size) time, O(longest line) memory.
// Tests: tests/sparse/matrix_market_test.cpp

#include "patterns/matrix_market_scan.hpp"

#include "fail.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <string>
#include <vector>

namespace ioattn::sparse::detail {

namespace {

constexpr std::size_t kMaxLine = 1024; // CHOLMOD reads lines into a fixed buffer
// CHOLMOD parses the size line and the indices as doubles: integers above 2^53 would reach it
// rounded (a 4 x 22222222222222223 file read as 4 x 22222222222222224), so they are refused.
constexpr std::int64_t kMaxExact = std::int64_t{1} << 53;

std::vector<std::string_view> split(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t p = 0;
    while (p < line.size()) {
        while (p < line.size() && std::isspace(static_cast<unsigned char>(line[p])) != 0)
            ++p;
        std::size_t q = p;
        while (q < line.size() && std::isspace(static_cast<unsigned char>(line[q])) == 0)
            ++q;
        if (q > p)
            out.push_back(line.substr(p, q - p));
        p = q;
    }
    return out;
}

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](char c) {
        return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    });
    return out;
}

bool parse_int(std::string_view s, std::int64_t& v) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
}

bool parse_real(std::string_view s) {
    double v = 0.0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
}

/// Reads lines, tracking the 1-based number, stripping a trailing '\r'.
class LineReader {
public:
    LineReader(std::string_view where, std::string_view path)
        : where_(where)
        , path_(path)
        , in_(std::string(path)) {
        if (!in_)
            fail(where_, "cannot open '", path_, "'");
    }

    bool next(std::string& line) {
        if (!std::getline(in_, line))
            return false;
        ++number_;
        if (!line.empty() && line.back() == '\r')
            line.pop_back();
        if (line.size() > kMaxLine)
            error("line longer than ", kMaxLine, " characters");
        return true;
    }

    /// The next line that is neither blank nor a comment; false at end of file.
    bool next_content(std::string& line) {
        while (next(line)) {
            const auto f = split(line);
            if (!f.empty() && f[0].front() != '%')
                return true;
        }
        return false;
    }

    [[nodiscard]] std::int64_t number() const { return number_; }

    template <typename... Parts>
    [[noreturn]] void error(const Parts&... parts) const {
        fail(where_, path_, ":", number_, ": ", parts...);
    }

    template <typename... Parts>
    [[noreturn]] void error_without_line(const Parts&... parts) const {
        fail(where_, path_, ": ", parts...);
    }

private:
    std::string_view where_;
    std::string_view path_;
    std::ifstream in_;
    std::int64_t number_ = 0;
};

MatrixMarketInfo scan_header(LineReader& r) {
    std::string line;
    if (!r.next(line))
        r.error_without_line("empty file (expected a '%%MatrixMarket' header)");
    const auto f = split(line);
    if (f.empty() || lower(f[0]) != "%%matrixmarket")
        r.error("missing '%%MatrixMarket' header");
    if (f.size() != 5)
        r.error("header has ",
                f.size(),
                " fields (expected '%%MatrixMarket matrix coordinate FIELD SYMMETRY')");
    if (lower(f[1]) != "matrix")
        r.error("object '", f[1], "' not supported (expected 'matrix')");
    const std::string format = lower(f[2]);
    if (format == "array")
        r.error("array (dense) format not supported (expected 'coordinate')");
    if (format != "coordinate")
        r.error("unknown format '", f[2], "' (expected 'coordinate')");
    MatrixMarketInfo info;
    const std::string field = lower(f[3]);
    if (field == "complex")
        r.error("complex field not supported (expected pattern, real or integer)");
    if (field != "pattern" && field != "real" && field != "integer")
        r.error("unknown field '", f[3], "' (expected pattern, real or integer)");
    info.pattern = field == "pattern";
    info.integer = field == "integer";
    const std::string symmetry = lower(f[4]);
    if (symmetry != "general" && symmetry != "symmetric")
        r.error("symmetry '", f[4], "' not supported (expected general or symmetric)");
    info.symmetric = symmetry == "symmetric";
    return info;
}

void scan_size(LineReader& r, MatrixMarketInfo& info) {
    std::string line;
    if (!r.next_content(line))
        r.error("truncated: no size line 'rows cols entries'");
    const auto f = split(line);
    if (f.size() != 3)
        r.error("size line has ", f.size(), " fields (expected 'rows cols entries')");
    const char* names[] = {"rows", "cols", "entries"};
    std::int64_t* values[] = {&info.rows, &info.cols, &info.entries};
    for (std::size_t k = 0; k < 3; ++k) {
        if (!parse_int(f[k], *values[k]))
            r.error(names[k], " '", f[k], "' is not an integer");
        if (*values[k] < 0)
            r.error(names[k], " = ", *values[k], " (expected >= 0)");
        if (*values[k] > kMaxExact)
            r.error(names[k], " = ", *values[k], " (expected <= 2^53 = ", kMaxExact, ")");
    }
    if (info.symmetric && info.rows != info.cols)
        r.error("symmetric matrix is ", info.rows, " x ", info.cols, " (expected square)");
}

void scan_entry(LineReader& r, const MatrixMarketInfo& info, std::string_view line) {
    const auto f = split(line);
    const std::size_t expected = info.pattern ? 2 : 3;
    if (f.size() != expected)
        r.error("entry has ",
                f.size(),
                " fields (expected ",
                info.pattern ? "'i j'" : "'i j value'",
                ")");
    std::int64_t i = 0;
    std::int64_t j = 0;
    if (!parse_int(f[0], i))
        r.error("row index '", f[0], "' is not an integer");
    if (!parse_int(f[1], j))
        r.error("column index '", f[1], "' is not an integer");
    if (i < 1 || i > info.rows)
        r.error("row index ", i, " out of range [1, ", info.rows, "]");
    if (j < 1 || j > info.cols)
        r.error("column index ", j, " out of range [1, ", info.cols, "]");
    if (info.symmetric && i < j)
        r.error("entry (", i, ", ", j, ") above the diagonal of a symmetric matrix");
    std::int64_t iv = 0;
    if (info.integer && !parse_int(f[2], iv))
        r.error("value '", f[2], "' is not an integer (field integer)");
    if (!info.pattern && !info.integer && !parse_real(f[2]))
        r.error("value '", f[2], "' is not a real number");
}

} // namespace

MatrixMarketInfo scan_matrix_market(std::string_view where, std::string_view path) {
    LineReader r(where, path);
    MatrixMarketInfo info = scan_header(r);
    scan_size(r, info);
    std::string line;
    for (std::int64_t e = 0; e < info.entries; ++e) {
        if (!r.next_content(line))
            r.error("truncated: ", e, " of ", info.entries, " entries present");
        scan_entry(r, info, line);
    }
    if (r.next_content(line))
        r.error("more entries than the ", info.entries, " declared");
    return info;
}

} // namespace ioattn::sparse::detail
