#pragma once
// The --check of `ioattn run` and the error lines of `ioattn demo`: a kernel's output against
// the double-precision reference, with the tolerance relative to a naive computation in the
// working type (docs/design.md section 14): passed iff err(kernel) <= 2 * err(naive) + tiny.

#include <measure.hpp>

namespace ioattn::app {

struct CheckResult {
    double max_abs_error = 0; ///< max |kernel - reference| over O and the finite L entries
    double naive_error = 0;   ///< the same for the naive computation in the working type
    double tiny = 0;          ///< slack: 8 eps max(1, |O_ref|), times sqrt(n_k + d) for double
    double error_ratio = 0;   ///< max_abs_error / max(naive_error, tiny)
    bool passed = false;
};

/// Inputs and reference outputs in double, computed once per problem and reused.
struct Reference {
    std::vector<double> o;
    std::vector<double> lse;
};

/// forward_reference<double> on the inputs of `data` (converted to double).
template <typename Scalar>
Reference reference_of(const measure::ForwardData<Scalar>& data, int threads);

/// Compares the outputs held in `data` (o, lse) with `ref`; the naive computation in Scalar is
/// run here on `data`'s inputs.
template <typename Scalar>
CheckResult
check_forward(const measure::ForwardData<Scalar>& data, const Reference& ref, int threads);

/// Max |x - ref| over O and L (two equal infinities count as 0, NaN propagates).
template <typename Scalar>
double
max_abs_error(const std::vector<Scalar>& o, const std::vector<Scalar>& lse, const Reference& ref);

} // namespace ioattn::app
