// ioattn._core.decode (see decode.hpp): q [B, H, n_new, d] float32 or float64; the caches
// [B, H_kv, capacity, d] (contiguous) or [num_blocks, H_kv, block_size, d] with block_table
// [B, max_blocks] (paged), of q's dtype or, with cache "bf16" or "fp16", 16-bit integer arrays
// holding bfloat16 or IEEE half bits (q float32); kv_lens [B] int64. Returns out [B, H, n_new, d_v] and, with
// return_lse, lse [B, H, n_new]. Caches in any layout the views take are read in place.
// Tests: tests/python/test_decode.py

#include "decode.hpp"

#include "arrays.hpp"
#include "settings.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/error.hpp>
#include <ioattn/fp16.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

namespace ioattn::python {

namespace {

constexpr const char* kWhere = "ioattn.decode";

using Ints = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

/// The arrays and settings of one call.
struct DecodeCall {
    py::handle q, k, v;
    Ints kv_lens;
    std::optional<Ints> block_table;
    std::int64_t window = 0;
    std::string pattern; ///< beyond windows (DecodeArgs::pattern); empty: none
    std::uint64_t seed = 0;
    std::optional<double> scale;
    bool return_lse = false;
    std::optional<int> threads;
};

std::string shape_of(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t i = 0; i < a.ndim(); ++i)
        s += (i > 0 ? ", " : "") + std::to_string(a.shape(i));
    return s + (a.ndim() == 1 ? ",)" : ")");
}

template <typename Scalar, typename Cache>
py::object run(const DecodeCall& c) {
    Inputs<Scalar> in;
    Inputs<Cache> cache;
    DecodeArgs<Scalar, Cache> a;
    a.q = in.view(c.q);
    a.k = cache.view(c.k);
    a.v = cache.view(c.v);
    const std::int64_t batch = a.q.batch;
    if (c.kv_lens.ndim() != 1 || c.kv_lens.shape(0) != batch)
        throw py::value_error(std::string(kWhere) + ": kv_lens has shape " + shape_of(c.kv_lens) +
                              ", expected (" + std::to_string(batch) + ",) for q's batch of " +
                              std::to_string(batch));
    a.kv_lens = c.kv_lens.data();
    if (c.block_table) {
        const Ints& t = *c.block_table;
        if (t.ndim() != 2)
            throw py::value_error(std::string(kWhere) + ": block_table has shape " + shape_of(t) +
                                  ", expected 2-D [B, max_blocks]");
        a.block_table = {t.data(), t.shape(0), t.shape(1), t.shape(1)};
    }
    a.window = c.window;
    a.pattern = c.pattern;
    a.pattern_seed = c.seed;
    a.scale = scale_of(c.scale, kWhere);
    auto [out, o] = output<Scalar>({a.q.batch, a.q.heads, a.q.rows, a.v.cols});
    auto [lse, l] = output<Scalar>({a.q.batch, a.q.heads, a.q.rows});
    a.o = o;
    a.lse = l;
    DecodeOptions opts;
    opts.where = kWhere;
    if (c.threads && *c.threads < 1)
        throw InvalidArgument(std::string(kWhere) + ": num_threads = " +
                              std::to_string(*c.threads) + " (expected >= 1 or None)");
    opts.threads = c.threads.value_or(0);
    {
        py::gil_scoped_release release;
        (void)decode(a, opts);
    }
    if (c.return_lse)
        return py::make_tuple(out, lse);
    return std::move(out);
}

bool is_bits16(py::handle h) {
    return py::array_t<std::uint16_t>::check_(h) || py::array_t<std::int16_t>::check_(h);
}

py::object decode_call(const DecodeCall& c, const std::string& cache) {
    for (const Named& a : {Named{"q", c.q}, Named{"k_cache", c.k}, Named{"v_cache", c.v}})
        if (!py::isinstance<py::array>(a.second))
            throw py::type_error(std::string(kWhere) + ": " + a.first + " is a " +
                                 a.second.get_type().attr("__name__").cast<std::string>() +
                                 ", not a numpy.ndarray");
    require_rank(kWhere, {"q", c.q}, 4, "[B, H, n_new, d]");
    require_rank(kWhere, {"k_cache", c.k}, 4, "[B, H_kv, capacity, d] or [blocks, H_kv, bs, d]");
    require_rank(
        kWhere, {"v_cache", c.v}, 4, "[B, H_kv, capacity, d_v] or [blocks, H_kv, bs, d_v]");
    if (cache == "bf16" || cache == "fp16") {
        if (!py::array_t<float>::check_(c.q) || !is_bits16(c.k) || !is_bits16(c.v))
            throw py::type_error(std::string(kWhere) + ": a " + cache +
                                 " cache takes float32 q and 16-bit k_cache, v_cache");
        return cache == "bf16" ? run<float, bf16>(c) : run<float, fp16>(c);
    }
    const Dtype t = common_dtype(kWhere, {{"q", c.q}, {"k_cache", c.k}, {"v_cache", c.v}});
    return t == Dtype::f32 ? run<float, float>(c) : run<double, double>(c);
}

} // namespace

void register_decode(py::module_& m) {
    using py::arg;
    m.def(
        "decode",
        [](py::handle q,
           py::handle k,
           py::handle v,
           Ints kv_lens,
           std::optional<Ints> block_table,
           std::int64_t window,
           std::string pattern,
           std::uint64_t seed,
           std::optional<double> scale,
           const std::string& cache,
           bool return_lse,
           std::optional<int> threads) {
            const DecodeCall c{q,
                               k,
                               v,
                               std::move(kv_lens),
                               std::move(block_table),
                               window,
                               std::move(pattern),
                               seed,
                               scale,
                               return_lse,
                               threads};
            return decode_call(c, cache);
        },
        arg("q"),
        arg("k_cache"),
        arg("v_cache"),
        arg("kv_lens"),
        arg("block_table").none(true),
        arg("window"),
        arg("pattern"),
        arg("seed"),
        arg("scale").none(true),
        arg("cache"),
        arg("return_lse"),
        arg("num_threads").none(true));
}

} // namespace ioattn::python
