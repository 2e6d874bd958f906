// ioattn::dist::detail::ComputeShard: a pass's views in Accumulator<Scalar>, the widening of
// bf16 inputs and the one rounding of its outputs (see compute_shard.hpp).

#include "compute_shard.hpp"

#include "ring_plan.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>

namespace ioattn::dist::detail {

namespace {

/// A packed Compute view shaped like `like`, carved from `next`.
template <typename Compute, typename T>
TensorView<Compute> carve(const TensorView<T>& like, Compute*& next) {
    auto v = TensorView<Compute>::packed(next, like.batch, like.heads, like.rows, like.cols);
    next += like.batch * like.heads * like.rows * like.cols;
    return v;
}

template <typename T>
std::int64_t elements(const TensorView<T>& v) {
    return v.batch * v.heads * v.rows * v.cols;
}

} // namespace

template <typename Scalar>
ComputeShard<Scalar>::ComputeShard(const ShardForwardArgs<Scalar>& f,
                                   const ShardBackwardArgs<Scalar>* b) {
    static_cast<ShardForwardArgs<Scalar>&>(caller_) = f;
    if (b != nullptr)
        caller_ = *b;
    if constexpr (!kWidened) {
        args_ = caller_;
    } else {
        const ShardBackwardArgs<Scalar>& c = caller_;
        store_.resize(static_cast<std::size_t>(
            elements(c.q) + elements(c.o) +
            (b != nullptr ? elements(c.d_o) + elements(c.d_q) + elements(c.d_k) + elements(c.d_v)
                          : 0)));
        Compute* next = store_.data();
        args_.problem = c.problem;
        args_.layout = c.layout;
        args_.lse = c.lse;
        const TensorView<Compute> q = carve(c.q, next);
        const TensorView<Compute> o = carve(c.o, next);
        args_.q = q;
        args_.o = o;
        copy_view<Scalar>(c.q, q);
        if (b != nullptr) {
            const TensorView<Compute> d_o = carve(c.d_o, next);
            args_.d_o = d_o;
            args_.d_q = carve(c.d_q, next);
            args_.d_k = carve(c.d_k, next);
            args_.d_v = carve(c.d_v, next);
            copy_view<Scalar>(c.o, o); // O as stored: D = rowsum(dO o O) reads the bf16 O
            copy_view<Scalar>(c.d_o, d_o);
        }
    }
}

template <typename Scalar>
void ComputeShard<Scalar>::round_o() const {
    if constexpr (kWidened)
        copy_view<Compute>(args_.o, caller_.o);
}

template <typename Scalar>
void ComputeShard<Scalar>::round_dq() const {
    if constexpr (kWidened)
        copy_view<Compute>(args_.d_q, caller_.d_q);
}

template <typename Scalar>
void ComputeShard<Scalar>::round_dkv() const {
    if constexpr (kWidened) {
        copy_view<Compute>(args_.d_k, caller_.d_k);
        copy_view<Compute>(args_.d_v, caller_.d_v);
    }
}

template <typename Scalar>
Accumulator<Scalar>*
compute_block(Scalar* wire, std::vector<Accumulator<Scalar>>& widened, std::int64_t words) {
    if constexpr (std::is_same_v<Scalar, Accumulator<Scalar>>) {
        return wire;
    } else {
        constexpr std::int64_t kChunk = 1 << 14;
        float* out = widened.data();
        parallel_for_tiles((words + kChunk - 1) / kChunk, [&](std::int64_t t, int /*worker*/) {
            const std::int64_t at = t * kChunk;
            widen(wire + at, out + at, std::min(kChunk, words - at));
        });
        return out;
    }
}

template class ComputeShard<float>;
template class ComputeShard<double>;
template class ComputeShard<bf16>;
template float* compute_block<float>(float*, std::vector<float>&, std::int64_t);
template double* compute_block<double>(double*, std::vector<double>&, std::int64_t);
template float* compute_block<bf16>(bf16*, std::vector<float>&, std::int64_t);

} // namespace ioattn::dist::detail
