#pragma once
// ceil(a / b) for the tests' independent restatements of the closed forms.

#include <cstdint>

namespace ioattn::test {

/// ceil(a / b) for a >= 0, b > 0.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return (a + b - 1) / b;
}

} // namespace ioattn::test
