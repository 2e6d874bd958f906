// ioattn::WidenedForward / WidenedBackward: bf16 views as packed fp32 copies for the float
// schedules, and the outputs rounded back (ioattn/widen.hpp, docs/design.md section 16).
// Traffic of the conversion, beyond the float schedule's: widening reads 2 and writes 4 bytes
// per input element, narrowing reads 4 and writes 2 bytes per output element.

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/widen.hpp>

#include <algorithm>
#include <new>
#include <string>
#include <utility>

namespace ioattn {

namespace {

constexpr std::int64_t kChunk = 1 << 14; ///< elements per conversion task

std::int64_t elements(const Problem& p, std::int64_t heads, std::int64_t rows, std::int64_t cols) {
    return p.batch * heads * rows * cols;
}

/// fn(from_row, to_row, cols) for every row of `from` (and `to`, of the same shape), in
/// parallel tasks of about kChunk elements; nothing when either has null data.
template <typename In, typename Out, typename Fn>
void convert(const TensorView<In>& from, const TensorView<Out>& to, const Fn& fn) {
    if (from.data == nullptr || to.data == nullptr || from.span() == 0)
        return;
    const std::int64_t rows = from.batch * from.heads * from.rows;
    const std::int64_t per_task = std::max<std::int64_t>(1, kChunk / from.cols);
    const std::int64_t tasks = (rows + per_task - 1) / per_task;
    parallel_for_tiles(tasks, [&](std::int64_t t, int) {
        const std::int64_t end = std::min(rows, (t + 1) * per_task);
        for (std::int64_t r = t * per_task; r < end; ++r) {
            const std::int64_t i = r % from.rows;
            const std::int64_t h = (r / from.rows) % from.heads;
            const std::int64_t b = r / (from.rows * from.heads);
            fn(from.row(b, h, i), to.row(b, h, i), from.cols);
        }
    });
}

/// A packed fp32 view shaped like `like`, carved from `next` (null data when `like` has none).
template <typename T>
TensorView<float> carve(const TensorView<T>& like, float*& next) {
    if (like.data == nullptr)
        return TensorView<float>::packed(nullptr, like.batch, like.heads, like.rows, like.cols);
    auto v = TensorView<float>::packed(next, like.batch, like.heads, like.rows, like.cols);
    next += v.extent;
    return v;
}

template <typename T>
std::int64_t need(const TensorView<T>& v) {
    return v.data == nullptr ? 0 : v.batch * v.heads * v.rows * v.cols;
}

void widen_into(const TensorView<const bf16>& from, const TensorView<float>& to) {
    convert(from, to, [](const bf16* in, float* out, std::int64_t n) { widen(in, out, n); });
}

void narrow_into(const TensorView<float>& from, const TensorView<bf16>& to) {
    convert(from, to, [](const float* in, bf16* out, std::int64_t n) { narrow(in, out, n); });
}

} // namespace

FloatBuffer::FloatBuffer(std::int64_t count, std::string_view where) {
    if (count == 0)
        return;
    const std::uint64_t bytes = bytes_of(count, sizeof(float));
    constexpr std::string_view kWhat = "fp32 copies of the bf16 operands";
    require_memory(where, bytes, kWhat);
    try {
        const auto [p, block] = kernels::ScratchPool::take(static_cast<std::size_t>(bytes));
        data_ = static_cast<float*>(p);
        block_ = block;
    } catch (const std::bad_alloc&) {
        throw_allocation_failed(where, bytes, kWhat);
    }
}

FloatBuffer::~FloatBuffer() {
    if (data_ != nullptr)
        kernels::ScratchPool::give(data_, block_);
}

FloatBuffer::FloatBuffer(FloatBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr))
    , block_(std::exchange(other.block_, 0)) {}

FloatBuffer& FloatBuffer::operator=(FloatBuffer&& other) noexcept {
    if (this != &other) {
        if (data_ != nullptr)
            kernels::ScratchPool::give(data_, block_);
        data_ = std::exchange(other.data_, nullptr);
        block_ = std::exchange(other.block_, 0);
    }
    return *this;
}

WidenedForward::WidenedForward(const ForwardArgs<bf16>& args,
                               std::string_view where,
                               bool sparse_operands) {
    ForwardArgs<bf16> a = args;
    a.validate(where, sparse_operands);
    buffer_ = FloatBuffer(need(a.q) + need(a.k) + need(a.v) + need(a.o), where);
    float* next = buffer_.data();
    const TensorView<float> q = carve(a.q, next), k = carve(a.k, next), v = carve(a.v, next);
    f_ = {a.problem, q, k, v, carve(a.o, next), a.lse};
    o_ = a.o;
    widen_into(a.q, q);
    widen_into(a.k, k);
    widen_into(a.v, v);
}

void WidenedForward::narrow() const {
    narrow_into(f_.o, o_);
}

std::uint64_t WidenedForward::bytes(const Problem& p) {
    const std::int64_t n = elements(p, p.heads, p.n_q, p.d) + elements(p, p.kv_heads, p.n_k, p.d) +
                           elements(p, p.kv_heads, p.n_k, p.d_v) +
                           elements(p, p.heads, p.n_q, p.d_v);
    return bytes_of(n, sizeof(float));
}

WidenedBackward::WidenedBackward(const BackwardArgs<bf16>& args,
                                 std::string_view where,
                                 bool sparse_operands) {
    BackwardArgs<bf16> a = args;
    a.validate(where, sparse_operands);
    buffer_ = FloatBuffer(need(a.q) + need(a.k) + need(a.v) + need(a.o) + need(a.d_o) +
                              need(a.d_q) + need(a.d_k) + need(a.d_v),
                          where);
    float* next = buffer_.data();
    const TensorView<float> q = carve(a.q, next), k = carve(a.k, next), v = carve(a.v, next);
    const TensorView<float> o = carve(a.o, next), d_o = carve(a.d_o, next);
    f_.problem = a.problem;
    f_.q = q;
    f_.k = k;
    f_.v = v;
    f_.o = o;
    f_.lse = a.lse;
    f_.d_o = d_o;
    f_.d_q = carve(a.d_q, next);
    f_.d_k = carve(a.d_k, next);
    f_.d_v = carve(a.d_v, next);
    d_q_ = a.d_q;
    d_k_ = a.d_k;
    d_v_ = a.d_v;
    widen_into(a.q, q);
    widen_into(a.k, k);
    widen_into(a.v, v);
    widen_into(a.o, o);
    widen_into(a.d_o, d_o);
}

void WidenedBackward::narrow() const {
    narrow_into(f_.d_q, d_q_);
    narrow_into(f_.d_k, d_k_);
    narrow_into(f_.d_v, d_v_);
}

std::uint64_t WidenedBackward::bytes(const Problem& p) {
    const std::int64_t n =
        2 * (elements(p, p.heads, p.n_q, p.d) + elements(p, p.kv_heads, p.n_k, p.d) +
             elements(p, p.kv_heads, p.n_k, p.d_v) + elements(p, p.heads, p.n_q, p.d_v));
    return bytes_of(n, sizeof(float));
}

} // namespace ioattn
