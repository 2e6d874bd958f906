#pragma once
/// Building block of the materialized backward kernels (dense and sparse): the end of a dV or
/// dK phase, which writes one key tile's accumulated chunk to slow memory.

#include <ioattn/io_counter.hpp>
#include <ioattn/view.hpp>

#include <cstdint>

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

/// Writes rows [j0, j0 + c), columns [z0, z0 + zw) of dV = acc (values) or dK = scale acc of
/// batch bb and key/value head g from the accumulator acc (c x zw, row-major; null in a dry
/// run), counts the write against `kv_slice` and releases the accumulator's c zw words.
template <typename Scalar, typename Counter>
void write_dkv(const BackwardArgs<Scalar>& a,
               bool values,
               std::int64_t bb,
               std::int64_t g,
               std::int64_t kv_slice,
               std::int64_t j0,
               std::int64_t c,
               std::int64_t z0,
               std::int64_t zw,
               const Scalar* acc,
               Counter& io) {
    if constexpr (Counter::kComputes) {
        const Scalar factor =
            values ? Scalar(1) : static_cast<Scalar>(a.problem.scale); // dK = scale dS^T Q
        for (std::int64_t y = 0; y < c; ++y) {
            Scalar* out = values ? a.d_v.row(bb, g, j0 + y) : a.d_k.row(bb, g, j0 + y);
            for (std::int64_t z = 0; z < zw; ++z)
                out[z0 + z] = factor * acc[y * zw + z];
        }
    }
    io.write({values ? Operand::d_v : Operand::d_k, kv_slice, j0, c, z0, zw});
    io.release(c * zw);
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
