// ioattn::ForwardArgs / BackwardArgs validation: every view against the resolved problem.

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/view.hpp>

#include <string>

namespace ioattn {

namespace {

std::string dims(std::int64_t b, std::int64_t h, std::int64_t r, std::int64_t c) {
    return "[" + std::to_string(b) + "][" + std::to_string(h) + "][" + std::to_string(r) + "][" +
           std::to_string(c) + "]";
}

template <typename T>
void check_view(std::string_view where,
                const char* name,
                const TensorView<T>& v,
                std::int64_t b,
                std::int64_t h,
                std::int64_t r,
                std::int64_t c,
                bool shape_only) {
    const std::string w(where);
    if (v.batch != b || v.heads != h || v.rows != r || v.cols != c)
        throw InvalidArgument(w + ": " + name + " has shape " +
                              dims(v.batch, v.heads, v.rows, v.cols) + ", expected " +
                              dims(b, h, r, c));
    if (v.stride_batch < 0 || v.stride_head < 0 || v.stride_row < c)
        throw InvalidArgument(w + ": " + name + " strides (" + std::to_string(v.stride_batch) +
                              ", " + std::to_string(v.stride_head) + ", " +
                              std::to_string(v.stride_row) + ") are negative or overlap rows of " +
                              std::to_string(c) + " elements");
    if (v.span() > v.extent)
        throw InvalidArgument(w + ": " + name + " addresses " + std::to_string(v.span()) +
                              " elements but its extent is " + std::to_string(v.extent));
    if (v.data == nullptr && !shape_only)
        throw InvalidArgument(w + ": " + name + " has null data");
}

template <typename A, typename B>
bool overlaps(const TensorView<A>& a, const TensorView<B>& b) {
    if (a.data == nullptr || b.data == nullptr || a.span() == 0 || b.span() == 0)
        return false;
    const auto* a0 = reinterpret_cast<const char*>(a.data);
    const auto* b0 = reinterpret_cast<const char*>(b.data);
    const auto* a1 = a0 + static_cast<std::size_t>(a.span()) * sizeof(A);
    const auto* b1 = b0 + static_cast<std::size_t>(b.span()) * sizeof(B);
    return a0 < b1 && b0 < a1;
}

template <typename Out, typename In>
void check_disjoint(std::string_view where,
                    const char* out_name,
                    const TensorView<Out>& out,
                    const char* in_name,
                    const TensorView<In>& in) {
    if (overlaps(out, in))
        throw InvalidArgument(std::string(where) + ": output " + out_name + " overlaps " + in_name);
}

} // namespace

template <typename Scalar>
void ForwardArgs<Scalar>::validate(std::string_view where, bool shape_only) {
    problem = problem.resolved(where);
    const Problem& p = problem;
    check_view(where, "q", q, p.batch, p.heads, p.n_q, p.d, shape_only);
    check_view(where, "k", k, p.batch, p.kv_heads, p.n_k, p.d, shape_only);
    check_view(where, "v", v, p.batch, p.kv_heads, p.n_k, p.d_v, shape_only);
    check_view(where, "o", o, p.batch, p.heads, p.n_q, p.d_v, shape_only);
    check_view(where, "lse", lse, p.batch, p.heads, p.n_q, 1, shape_only);
    check_disjoint(where, "o", o, "q", q);
    check_disjoint(where, "o", o, "k", k);
    check_disjoint(where, "o", o, "v", v);
    check_disjoint(where, "lse", lse, "q", q);
    check_disjoint(where, "lse", lse, "k", k);
    check_disjoint(where, "lse", lse, "v", v);
    check_disjoint(where, "lse", lse, "o", o);
}

template <typename Scalar>
void BackwardArgs<Scalar>::validate(std::string_view where, bool shape_only) {
    ForwardArgs<Scalar>::validate(where, shape_only);
    const Problem& p = this->problem;
    check_view(where, "d_o", d_o, p.batch, p.heads, p.n_q, p.d_v, shape_only);
    check_view(where, "d_q", d_q, p.batch, p.heads, p.n_q, p.d, shape_only);
    check_view(where, "d_k", d_k, p.batch, p.kv_heads, p.n_k, p.d, shape_only);
    check_view(where, "d_v", d_v, p.batch, p.kv_heads, p.n_k, p.d_v, shape_only);
    const TensorView<const Scalar> o_in = this->o;
    const TensorView<const Accumulator<Scalar>> lse_in = this->lse;
    const auto check_out = [&](const char* name, const TensorView<Scalar>& out) {
        check_disjoint(where, name, out, "q", this->q);
        check_disjoint(where, name, out, "k", this->k);
        check_disjoint(where, name, out, "v", this->v);
        check_disjoint(where, name, out, "o", o_in);
        check_disjoint(where, name, out, "lse", lse_in);
        check_disjoint(where, name, out, "d_o", d_o);
    };
    check_out("d_q", d_q);
    check_out("d_k", d_k);
    check_out("d_v", d_v);
    check_disjoint(where, "d_q", d_q, "d_k", TensorView<const Scalar>(d_k));
    check_disjoint(where, "d_q", d_q, "d_v", TensorView<const Scalar>(d_v));
    check_disjoint(where, "d_k", d_k, "d_v", TensorView<const Scalar>(d_v));
}

#define IOATTN_INSTANTIATE(Scalar) template struct ForwardArgs<Scalar>;
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar) template struct BackwardArgs<Scalar>;
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
template struct ForwardArgs<bf16>; // storage type of the widened calls (ioattn/widen.hpp)
template struct BackwardArgs<bf16>;

} // namespace ioattn
