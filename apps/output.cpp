// Tables and number formatting for the ioattn program.

#include "output.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <utility>

namespace ioattn::app {

Table::Table(std::vector<std::string> header)
    : header_(std::move(header)) {}

void Table::add(std::vector<std::string> row) {
    row.resize(header_.size());
    rows_.push_back(std::move(row));
}

namespace {

bool numeric(const std::string& s) {
    return !s.empty() && (std::isdigit(static_cast<unsigned char>(s.front())) != 0 ||
                          (s.size() > 1 && (s.front() == '-' || s.front() == '.')));
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos)
        return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"')
            out += '"';
        out += c;
    }
    return out + "\"";
}

} // namespace

void Table::print(std::ostream& os) const {
    std::vector<std::size_t> width(header_.size());
    for (std::size_t c = 0; c < header_.size(); ++c) {
        width[c] = header_[c].size();
        for (const auto& r : rows_)
            width[c] = std::max(width[c], r[c].size());
    }
    const auto line = [&](const std::vector<std::string>& r, bool head) {
        for (std::size_t c = 0; c < r.size(); ++c) {
            const std::string pad(width[c] - r[c].size(), ' ');
            os << (c == 0 ? "" : "  ") << (!head && numeric(r[c]) ? pad + r[c] : r[c] + pad);
        }
        os << '\n';
    };
    line(header_, true);
    std::size_t total = 0;
    for (std::size_t w : width)
        total += w + 2;
    os << std::string(total > 2 ? total - 2 : 0, '-') << '\n';
    for (const auto& r : rows_)
        line(r, false);
}

void Table::print_csv(std::ostream& os) const {
    const auto line = [&](const std::vector<std::string>& r) {
        for (std::size_t c = 0; c < r.size(); ++c)
            os << (c == 0 ? "" : ",") << csv_field(r[c]);
        os << '\n';
    };
    line(header_);
    for (const auto& r : rows_)
        line(r);
}

std::string fixed(double x, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, x);
    return buf;
}

std::string sig(double x) {
    char buf[64];
    const double a = std::fabs(x);
    if (x == 0.0 || (a >= 1e-3 && a < 1e7))
        std::snprintf(buf, sizeof buf, "%.4g", x);
    else
        std::snprintf(buf, sizeof buf, "%.3e", x);
    return buf;
}

std::string grouped(std::int64_t x) {
    std::string digits = std::to_string(x < 0 ? -x : x);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i != 0 && (digits.size() - i) % 3 == 0)
            out += ',';
        out += digits[i];
    }
    return x < 0 ? "-" + out : out;
}

std::string bytes_of(std::int64_t words, std::int64_t word_bytes) {
    double b = static_cast<double>(words) * static_cast<double>(word_bytes);
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    std::size_t u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        ++u;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
    return buf;
}

} // namespace ioattn::app
