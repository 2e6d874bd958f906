// ioattn._core's calls (see calls.hpp). Arrays are [B, H, N, d]: q [B, H, n_q, d], k
// [B, kv_heads, n_k, d], v [B, kv_heads, n_k, d_v]; out [B, H, n_q, d_v], lse [B, H, n_q].
// Shapes that disagree reach the library's view validation (InvalidArgument -> ValueError).

#include "calls.hpp"

#include "arrays.hpp"
#include "mask.hpp"
#include "report.hpp"
#include "settings.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/error.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/stl.h>

namespace ioattn::python {

namespace {

/// What every call shares: the problem, the options of the entry point and the support.
struct Call {
    Problem problem;
    AttentionOptions options;
    const Mask* mask = nullptr;

    template <typename Scalar>
    [[nodiscard]] Structure<Scalar> structure() const {
        Structure<Scalar> s;
        s.support = mask != nullptr ? &mask->support() : nullptr;
        return s;
    }
};

/// The problem of q [B, H, n_q, d], k [B, kv, n_k, d], v [B, kv, n_k, d_v].
Problem problem_of(py::handle q,
                   py::handle k,
                   py::handle v,
                   bool causal,
                   std::optional<double> scale,
                   const char* where) {
    Problem p;
    p.batch = extent(q, 0);
    p.heads = extent(q, 1);
    p.kv_heads = extent(k, 1);
    p.n_q = extent(q, 2);
    p.n_k = extent(k, 2);
    p.d = extent(q, 3);
    p.d_v = extent(v, 3);
    p.causal = causal;
    p.scale = scale_of(scale, where);
    return p.resolved(where);
}

template <typename Scalar>
TensorView<Scalar> writable(const TensorView<const Scalar>& v) {
    // o and lse are inputs of the backward: BackwardArgs types them as the forward's outputs,
    // and the backward kernels only read them
    return {const_cast<Scalar*>(v.data),
            v.batch,
            v.heads,
            v.rows,
            v.cols,
            v.stride_batch,
            v.stride_head,
            v.stride_row,
            v.extent};
}

/// The views of one forward call: q, k, v read in place or copied, out and lse new arrays.
template <typename Scalar>
struct Forward {
    Inputs<Scalar> in;
    ForwardArgs<Scalar> args;
    py::array_t<NumpyOf<Scalar>> out;
    py::array_t<Accumulator<Scalar>> lse; // bf16: L stays float32

    Forward(const Problem& p, py::handle q, py::handle k, py::handle v) {
        args.problem = p;
        args.q = in.view(q);
        args.k = in.view(k);
        args.v = in.view(v);
        std::tie(out, args.o) = output<Scalar>({p.batch, p.heads, p.n_q, p.d_v});
        std::tie(lse, args.lse) = output<Accumulator<Scalar>>({p.batch, p.heads, p.n_q});
    }
};

template <typename Scalar>
py::object forward(const Call& c, py::handle q, py::handle k, py::handle v, bool return_lse) {
    Forward<Scalar> f(c.problem, q, k, v);
    {
        py::gil_scoped_release release;
        (void)attention(f.args, c.structure<Scalar>(), c.options);
    }
    if (return_lse)
        return py::make_tuple(f.out, f.lse);
    return std::move(f.out);
}

struct BackwardInputs {
    py::handle d_o, q, k, v, o, lse;
};

template <typename Scalar>
py::tuple backward(const Call& c, const BackwardInputs& x) {
    const Problem& p = c.problem;
    Inputs<Scalar> in;
    Inputs<Accumulator<Scalar>> in_lse;
    BackwardArgs<Scalar> a;
    a.problem = p;
    a.q = in.view(x.q);
    a.k = in.view(x.k);
    a.v = in.view(x.v);
    a.o = writable(in.view(x.o));
    a.lse = writable(in_lse.view(x.lse, true));
    a.d_o = in.view(x.d_o);
    auto [dq, gq] = output<Scalar>({p.batch, p.heads, p.n_q, p.d});
    auto [dk, gk] = output<Scalar>({p.batch, p.kv_heads, p.n_k, p.d});
    auto [dv, gv] = output<Scalar>({p.batch, p.kv_heads, p.n_k, p.d_v});
    a.d_q = gq;
    a.d_k = gk;
    a.d_v = gv;
    {
        py::gil_scoped_release release;
        (void)attention_backward(a, c.structure<Scalar>(), c.options);
    }
    return py::make_tuple(dq, dk, dv);
}

constexpr const char* kLayout = "[B, H, N, d]";

py::object attention_call(py::handle q,
                          py::handle k,
                          py::handle v,
                          const Mask* mask,
                          bool causal,
                          const Settings& s,
                          bool return_lse,
                          bool is_bf16) {
    constexpr const char* where = "ioattn.attention";
    const Dtype t = common_dtype(where, {{"q", q}, {"k", k}, {"v", v}}, is_bf16);
    for (const Named& a : {Named{"q", q}, Named{"k", k}, Named{"v", v}})
        require_rank(where, a, 4, kLayout);
    const Call c{
        problem_of(q, k, v, causal, s.scale, where), options_of(s, t == Dtype::f64, where), mask};
    if (t == Dtype::bf16)
        return forward<ioattn::bf16>(c, q, k, v, return_lse);
    return t == Dtype::f32 ? forward<float>(c, q, k, v, return_lse)
                           : forward<double>(c, q, k, v, return_lse);
}

py::tuple backward_call(
    const BackwardInputs& x, const Mask* mask, bool causal, const Settings& s, bool is_bf16) {
    constexpr const char* where = "ioattn.attention_backward";
    const Dtype t =
        is_bf16 ? common_dtype(where,
                               {{"dout", x.d_o}, {"q", x.q}, {"k", x.k}, {"v", x.v}, {"out", x.o}},
                               true)
                : common_dtype(where,
                               {{"dout", x.d_o},
                                {"q", x.q},
                                {"k", x.k},
                                {"v", x.v},
                                {"out", x.o},
                                {"lse", x.lse}});
    if (is_bf16 && common_dtype(where, {{"lse", x.lse}}) != Dtype::f32)
        throw py::type_error(std::string(where) + ": with bf16 tensors lse must be float32");
    for (const Named& a : {Named{"dout", x.d_o},
                           Named{"q", x.q},
                           Named{"k", x.k},
                           Named{"v", x.v},
                           Named{"out", x.o}})
        require_rank(where, a, 4, kLayout);
    require_rank(where, {"lse", x.lse}, 3, "[B, H, N]");
    const Call c{problem_of(x.q, x.k, x.v, causal, s.scale, where),
                 options_of(s, t == Dtype::f64, where),
                 mask};
    if (t == Dtype::bf16)
        return backward<ioattn::bf16>(c, x);
    return t == Dtype::f32 ? backward<float>(c, x) : backward<double>(c, x);
}

/// The seconds of each of `repeat` C++ calls of the entry point on the arrays' views, the
/// outputs allocated once: the benchmark's baseline for the Python call's overhead.
std::vector<double> time_attention(py::handle q,
                                   py::handle k,
                                   py::handle v,
                                   const Mask* mask,
                                   bool causal,
                                   int repeat,
                                   std::optional<int> threads) {
    constexpr const char* where = "ioattn._time_attention";
    if (common_dtype(where, {{"q", q}, {"k", k}, {"v", v}}) != Dtype::f32)
        throw py::type_error(std::string(where) + ": float32 only");
    for (const Named& a : {Named{"q", q}, Named{"k", k}, Named{"v", v}})
        require_rank(where, a, 4, kLayout);
    Settings s;
    s.threads = threads;
    const Call c{
        problem_of(q, k, v, causal, std::nullopt, where), options_of(s, false, where), mask};
    Forward<float> f(c.problem, q, k, v);
    std::vector<double> seconds;
    py::gil_scoped_release release;
    const Structure<float> st = c.structure<float>();
    for (int r = 0; r < repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        (void)attention(f.args, st, c.options);
        const auto t1 = std::chrono::steady_clock::now();
        seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    return seconds;
}

} // namespace

void register_calls(py::module_& m) {
    using py::arg;
    m.def(
        "attention",
        [](py::handle q,
           py::handle k,
           py::handle v,
           const Mask* mask,
           bool causal,
           std::optional<double> scale,
           std::string schedule,
           std::string select,
           std::optional<std::int64_t> memory,
           std::optional<std::int64_t> cache_bytes,
           bool return_lse,
           std::optional<int> threads,
           std::string variant,
           bool is_bf16) {
            const Settings s{scale,
                             std::move(schedule),
                             std::move(select),
                             memory,
                             threads,
                             true,
                             cache_bytes,
                             std::move(variant),
                             std::nullopt};
            return attention_call(q, k, v, mask, causal, s, return_lse, is_bf16);
        },
        arg("q"),
        arg("k"),
        arg("v"),
        arg("mask").none(true),
        arg("causal"),
        arg("scale").none(true),
        arg("schedule"),
        arg("select"),
        arg("M").none(true),
        arg("cache_bytes").none(true),
        arg("return_lse"),
        arg("num_threads").none(true),
        arg("variant"),
        arg("bf16") = false);
    m.def(
        "attention_backward",
        [](py::handle d_o,
           py::handle q,
           py::handle k,
           py::handle v,
           py::handle o,
           py::handle lse,
           const Mask* mask,
           bool causal,
           std::optional<double> scale,
           std::string schedule,
           std::string select,
           std::optional<std::int64_t> memory,
           std::optional<std::int64_t> cache_bytes,
           std::optional<int> threads,
           std::string variant,
           bool is_bf16) {
            const Settings s{scale,
                             std::move(schedule),
                             std::move(select),
                             memory,
                             threads,
                             true,
                             cache_bytes,
                             std::move(variant),
                             std::nullopt};
            return backward_call({d_o, q, k, v, o, lse}, mask, causal, s, is_bf16);
        },
        arg("dout"),
        arg("q"),
        arg("k"),
        arg("v"),
        arg("out"),
        arg("lse"),
        arg("mask").none(true),
        arg("causal"),
        arg("scale").none(true),
        arg("schedule"),
        arg("select"),
        arg("M").none(true),
        arg("cache_bytes").none(true),
        arg("num_threads").none(true),
        arg("variant"),
        arg("bf16") = false);
    m.def("_time_attention",
          &time_attention,
          arg("q"),
          arg("k"),
          arg("v"),
          arg("mask").none(true),
          arg("causal"),
          arg("repeat"),
          arg("num_threads").none(true));
    m.def("_in_place",
          &in_place,
          arg("array"),
          "Whether a call reads this array in place (else it copies it once): for the tests.");
    register_reports(m);
}

} // namespace ioattn::python
