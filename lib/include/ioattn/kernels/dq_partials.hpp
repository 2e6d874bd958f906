#pragma once
/// The dQ partial sums of the fused backward (dense/backward_fused.cpp and its sparse twin):
/// key block j adds dS K_j into the partial of its group j mod G, pass R sums the G partials of
/// a row in group order. Rows are d lane-padded (dw, kLanePad), so the broadcast micro-kernel
/// writes them in place.

#include <ioattn/kernels/target.hpp>

#include <cstdint>

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

template <typename Scalar>
struct DqPartials {
    std::int64_t groups = 0; ///< G
    std::int64_t dw = 0;     ///< words per row
    std::int64_t n_q = 0;
    std::int64_t slices = 0; ///< batch * heads
    Scalar* data = nullptr;  ///< G x slices x n_q rows
    /// Per row, whether its group has written it yet (the sparse kernel, whose groups reach
    /// scattered rows; null in the dense one, where a group's first block reaches them all).
    std::uint8_t* reached = nullptr;

    [[nodiscard]] std::int64_t at(std::int64_t g, std::int64_t slice, std::int64_t i) const {
        return (g * slices + slice) * n_q + i;
    }

    [[nodiscard]] Scalar* row(std::int64_t g, std::int64_t slice, std::int64_t i) const {
        return data + at(g, slice, i) * dw;
    }
};

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
