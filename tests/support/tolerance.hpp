#pragma once
// The error-ratio rule (docs/design.md section 14, after FlashAttention's tests): a kernel in
// working type T is judged against a higher-precision oracle by comparison with the error that the
// naive computation in T makes against the same oracle:
//     err(kernel<T>) <= 2 * err(naive<T>) + tiny,
// with the oracle in double for float kernels and in long double (x86: 64-bit mantissa) for
// double kernels. tiny is a few ulps of T at the magnitude of the outputs, so exact cases
// (err(naive) = 0) still allow a different but correct summation order.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

namespace ioattn::test {

/// The oracle's accumulation type for working type T.
template <typename T>
using Oracle = std::conditional_t<std::is_same_v<T, float>, double, long double>;

/// Max |a - b| over elements; equal infinities and NaN against NaN count as 0, a NaN or infinity
/// against anything else as +inf.
template <typename A, typename B>
long double max_abs_error(const std::vector<A>& a, const std::vector<B>& b) {
    if (a.size() != b.size())
        return std::numeric_limits<long double>::infinity();
    long double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto x = static_cast<long double>(a[i]);
        const auto y = static_cast<long double>(b[i]);
        if (std::isnan(x) || std::isnan(y)) {
            if (std::isnan(x) != std::isnan(y))
                return std::numeric_limits<long double>::infinity();
            continue;
        }
        if (std::isinf(x) || std::isinf(y)) {
            if (x != y)
                return std::numeric_limits<long double>::infinity();
            continue;
        }
        worst = std::max(worst, std::fabs(x - y));
    }
    return worst;
}

/// Largest finite |x| (at least 1), the magnitude for the tiny term.
template <typename A>
long double magnitude(const std::vector<A>& a) {
    long double m = 1;
    for (const A& x : a)
        if (std::isfinite(static_cast<long double>(x)))
            m = std::max(m, std::fabs(static_cast<long double>(x)));
    return m;
}

/// The tiny term: 4 ulps of T at the outputs' magnitude.
template <typename T, typename A>
long double tiny(const std::vector<A>& oracle) {
    return 4.0L * static_cast<long double>(std::numeric_limits<T>::epsilon()) * magnitude(oracle);
}

/// Verdict of the error rule for one output tensor (O or L).
struct ErrorCheck {
    long double kernel_error = 0;
    long double naive_error = 0;
    long double allowed = 0;

    [[nodiscard]] bool passed() const { return kernel_error <= allowed; }
};

/// err(kernel<T>) <= 2*err(naive<T>) + tiny, both against the oracle.
template <typename T, typename K, typename N, typename O>
ErrorCheck error_rule(const std::vector<K>& kernel,
                      const std::vector<N>& naive_t,
                      const std::vector<O>& oracle) {
    ErrorCheck c;
    c.kernel_error = max_abs_error(kernel, oracle);
    c.naive_error = max_abs_error(naive_t, oracle);
    c.allowed = 2 * c.naive_error + tiny<T>(oracle);
    return c;
}

} // namespace ioattn::test
