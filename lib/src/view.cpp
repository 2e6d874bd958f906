// ioattn::ForwardArgs / BackwardArgs validation: every view against the resolved problem.

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/view.hpp>
#include <ioattn/view_checks.hpp>

#include <string>

namespace ioattn {

namespace {

template <typename T>
void check_view(std::string_view where,
                const char* name,
                const TensorView<T>& v,
                std::int64_t b,
                std::int64_t h,
                std::int64_t r,
                std::int64_t c,
                bool shape_only) {
    detail::check_view_shape(where, name, v, b, h, r, c);
    detail::check_view_layout(where, name, v, shape_only);
}

template <typename Out, typename In>
void check_disjoint(std::string_view where,
                    const char* out_name,
                    const TensorView<Out>& out,
                    const char* in_name,
                    const TensorView<In>& in) {
    if (detail::views_overlap(out, in))
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
