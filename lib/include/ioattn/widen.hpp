#pragma once
/// Tier 3: bf16 operands through the fp32 schedules (docs/design.md section 16). A call with
/// bf16 views widens its bf16 inputs exactly into packed fp32 copies, runs the float schedule
/// on them and rounds its fp32 outputs into the caller's bf16 views (nearest, ties to even);
/// L stays the caller's fp32 view, written or read in place. The bf16 entries of
/// dense::forward / backward and of ioattn::attention / attention_backward use these; native
/// bf16 kernels replace them schedule by schedule.
///
/// Memory: 4 bytes per element of every bf16 view (forward: Q, K, V, O; backward: Q, K, V, O,
/// dO, dQ, dK, dV), checked against memory_limit() before anything is allocated (ResourceError
/// naming the caller). A view with null data (a shape-only dry run, or an operand the call
/// takes stored sparse) gets a null fp32 view and no copy. Conversions run in parallel in the
/// current arena, each element by one task: the results do not depend on the thread count.

#include <ioattn/bf16.hpp>
#include <ioattn/view.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ioattn {

/// Packed fp32 storage of one widened call (uninitialised, 64-byte aligned), taken from and
/// given back to the calling thread's kernels::ScratchPool, so repeated calls reuse mapped
/// pages instead of faulting fresh ones in. Destroy it on the thread that made it.
class FloatBuffer {
public:
    FloatBuffer() = default;

    /// `count` floats; throws ResourceError naming `where` when they exceed memory_limit() or
    /// their allocation fails.
    FloatBuffer(std::int64_t count, std::string_view where);

    ~FloatBuffer();
    FloatBuffer(FloatBuffer&& other) noexcept;
    FloatBuffer& operator=(FloatBuffer&& other) noexcept;
    FloatBuffer(const FloatBuffer&) = delete;
    FloatBuffer& operator=(const FloatBuffer&) = delete;

    [[nodiscard]] float* data() const { return data_; }

private:
    float* data_ = nullptr;
    std::size_t block_ = 0; ///< the pool block's size
};

/// The fp32 copies of a bf16 forward call.
class WidenedForward {
public:
    /// Validates `args` (naming `where`; null data allowed for q, k, v when `sparse_operands`),
    /// allocates fp32 q, k, v, o and widens q, k, v into them.
    WidenedForward(const ForwardArgs<bf16>& args, std::string_view where, bool sparse_operands);

    /// The fp32 views the float schedule runs on (lse: the caller's).
    [[nodiscard]] const ForwardArgs<float>& args() const { return f_; }

    /// Rounds the fp32 o into the caller's bf16 o.
    void narrow() const;

    /// Bytes of the copies of a forward of `problem`.
    static std::uint64_t bytes(const Problem& problem);

private:
    FloatBuffer buffer_;
    ForwardArgs<float> f_;
    TensorView<bf16> o_;
};

/// The fp32 copies of a bf16 backward call.
class WidenedBackward {
public:
    /// As WidenedForward: fp32 q, k, v, o, d_o (widened), d_q, d_k, d_v (written by the float
    /// schedule, rounded back by narrow()).
    WidenedBackward(const BackwardArgs<bf16>& args, std::string_view where, bool sparse_operands);

    [[nodiscard]] const BackwardArgs<float>& args() const { return f_; }

    /// Rounds the fp32 d_q, d_k, d_v into the caller's bf16 views.
    void narrow() const;

    /// Bytes of the copies of a backward of `problem`.
    static std::uint64_t bytes(const Problem& problem);

private:
    FloatBuffer buffer_;
    BackwardArgs<float> f_;
    TensorView<bf16> d_q_, d_k_, d_v_;
};

} // namespace ioattn
