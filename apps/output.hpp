#pragma once
// Plain-text tables, CSV and number formatting for the ioattn program.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ioattn::app {

/// A table of strings: printed aligned (numbers right-aligned) or as CSV.
class Table {
public:
    explicit Table(std::vector<std::string> header);

    void add(std::vector<std::string> row);
    void print(std::ostream& os) const;
    void print_csv(std::ostream& os) const;

private:
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

/// Fixed notation with `digits` decimals.
std::string fixed(double x, int digits);
/// Three significant digits, scientific notation outside [1e-3, 1e7).
std::string sig(double x);
/// An integer with thousands separators ("12,582,912").
std::string grouped(std::int64_t x);
/// Words as a human size in bytes for a word of `word_bytes` ("2.0 MiB").
std::string bytes_of(std::int64_t words, std::int64_t word_bytes);

} // namespace ioattn::app
