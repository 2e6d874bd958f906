#pragma once
// Owned, seeded operands of one forward problem with optional padding (non-packed strided
// views), and packed copies of the outputs for comparison with the naive reference.

#include "printing.hpp" // every suite that builds cases also compares IoReports
#include "random.hpp"
#include "reference.hpp"

#include <ioattn/problem.hpp>
#include <ioattn/view.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace ioattn::test {

/// Extra elements after each row, head and batch slice (0: packed).
struct Padding {
    std::int64_t row = 0;
    std::int64_t head = 0;
    std::int64_t batch = 0;
};

/// One owned tensor and its (possibly strided) view; padding holds `fill`.
template <typename T>
struct Buffer {
    std::vector<T> data;
    TensorView<T> view;

    Buffer() = default;

    Buffer(std::int64_t b, std::int64_t h, std::int64_t r, std::int64_t c, Padding pad, T fill) {
        view.batch = b;
        view.heads = h;
        view.rows = r;
        view.cols = c;
        view.stride_row = c + pad.row;
        view.stride_head = r * view.stride_row + pad.head;
        view.stride_batch = h * view.stride_head + pad.batch;
        view.extent = b * view.stride_batch;
        data.assign(static_cast<std::size_t>(view.extent), fill);
        view.data = data.data();
    }

    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&&) = delete;
    Buffer& operator=(Buffer&&) = delete;

    T& operator()(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) {
        return data[static_cast<std::size_t>(b * view.stride_batch + h * view.stride_head +
                                             i * view.stride_row + c)];
    }

    T operator()(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) const {
        return data[static_cast<std::size_t>(b * view.stride_batch + h * view.stride_head +
                                             i * view.stride_row + c)];
    }

    /// Fills the logical elements with seeded uniform values in [lo, hi).
    void randomize(Rng& rng, double lo = -1.0, double hi = 1.0) {
        for (std::int64_t b = 0; b < view.batch; ++b)
            for (std::int64_t h = 0; h < view.heads; ++h)
                for (std::int64_t i = 0; i < view.rows; ++i)
                    for (std::int64_t c = 0; c < view.cols; ++c)
                        (*this)(b, h, i, c) = static_cast<T>(rng.uniform(lo, hi));
    }

    /// The logical elements, packed, as double.
    [[nodiscard]] std::vector<double> packed() const {
        std::vector<double> out;
        out.reserve(static_cast<std::size_t>(view.batch * view.heads * view.rows * view.cols));
        for (std::int64_t b = 0; b < view.batch; ++b)
            for (std::int64_t h = 0; h < view.heads; ++h)
                for (std::int64_t i = 0; i < view.rows; ++i)
                    for (std::int64_t c = 0; c < view.cols; ++c)
                        out.push_back(static_cast<double>((*this)(b, h, i, c)));
        return out;
    }

    /// Which elements of `data` belong to the logical tensor (the others are padding).
    [[nodiscard]] std::vector<bool> logical_mask() const {
        std::vector<bool> logical(data.size(), false);
        for (std::int64_t b = 0; b < view.batch; ++b)
            for (std::int64_t h = 0; h < view.heads; ++h)
                for (std::int64_t i = 0; i < view.rows; ++i)
                    for (std::int64_t c = 0; c < view.cols; ++c)
                        logical[static_cast<std::size_t>(b * view.stride_batch +
                                                         h * view.stride_head +
                                                         i * view.stride_row + c)] = true;
        return logical;
    }

    /// Sets every element outside the logical tensor to `fill`.
    void fill_padding(T fill) {
        const std::vector<bool> logical = logical_mask();
        for (std::size_t e = 0; e < data.size(); ++e)
            if (!logical[e])
                data[e] = fill;
    }

    /// Whether every element outside the logical tensor still holds `fill` (bitwise).
    [[nodiscard]] bool padding_intact(T fill) const {
        const std::vector<bool> logical = logical_mask();
        for (std::size_t e = 0; e < data.size(); ++e)
            if (!logical[e] && std::memcmp(&data[e], &fill, sizeof(T)) != 0)
                return false;
        return true;
    }
};

/// Whether two buffers hold the same bits.
template <typename T>
bool bitwise_equal(const Buffer<T>& x, const Buffer<T>& y) {
    return x.data.size() == y.data.size() &&
           std::memcmp(x.data.data(), y.data.data(), x.data.size() * sizeof(T)) == 0;
}

/// Sentinel written into output padding; kernels must leave it alone.
template <typename T>
constexpr T kOutputSentinel = T(-12345);

/// Q, K, V (seeded uniform in [-1, 1)), O and L for one problem. Input padding holds NaN, so a
/// kernel that reads outside the views poisons its output; output padding holds a sentinel.
template <typename T>
struct AttentionCase {
    Problem problem; ///< defaults filled by resolve()
    std::uint64_t seed;
    Buffer<T> q;
    Buffer<T> k;
    Buffer<T> v;
    Buffer<T> o;
    Buffer<T> lse;

    AttentionCase(const Problem& p_in, std::uint64_t seed_in, Padding pad = {})
        : problem(resolve(p_in))
        , seed(seed_in)
        , q(problem.batch, problem.heads, problem.n_q, problem.d, pad, kNaN)
        , k(problem.batch, problem.kv_heads, problem.n_k, problem.d, pad, kNaN)
        , v(problem.batch, problem.kv_heads, problem.n_k, problem.d_v, pad, kNaN)
        , o(problem.batch, problem.heads, problem.n_q, problem.d_v, pad, kOutputSentinel<T>)
        , lse(problem.batch, problem.heads, problem.n_q, 1, pad, kOutputSentinel<T>) {
        Rng rng(seed);
        q.randomize(rng);
        k.randomize(rng);
        v.randomize(rng);
    }

    /// Argument pack over the owned buffers. The problem is passed unresolved when asked, to
    /// exercise the kernels' own default filling.
    [[nodiscard]] ForwardArgs<T> args() const {
        ForwardArgs<T> a;
        a.problem = problem;
        a.q = q.view;
        a.k = k.view;
        a.v = v.view;
        a.o = o.view;
        a.lse = lse.view;
        return a;
    }

    /// Resets the outputs to the sentinel (between runs of different kernels).
    void clear_outputs() {
        for (T& x : o.data)
            x = kOutputSentinel<T>;
        for (T& x : lse.data)
            x = kOutputSentinel<T>;
    }

    /// Naive attention of this case's inputs in Acc arithmetic.
    template <typename Acc>
    [[nodiscard]] NaiveResult<Acc> naive() const {
        return naive_forward<Acc, T>(problem, q.view, k.view, v.view);
    }

    [[nodiscard]] bool outputs_padding_intact() const {
        return o.padding_intact(kOutputSentinel<T>) && lse.padding_intact(kOutputSentinel<T>);
    }

    static constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
};

} // namespace ioattn::test
