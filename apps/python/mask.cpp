// ioattn.Mask (see mask.hpp): the builders, the CSR and scipy views, set operations and the
// plan cache's settings. Every builder validates through sparse::Support (InvalidArgument ->
// ValueError), runs without the GIL once its arrays are read, and finds or files its support
// in the plan cache (by spec string and shape, or by content).

#include "mask.hpp"

#include <ioattn/sparse/matrix_market.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/support_cache.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

namespace ioattn::python {

namespace {

using Index = std::vector<std::int64_t>;

/// The 1-D integer array `h` as int64 values; TypeError for other dtypes or objects.
Index index_array(py::handle h, const char* name) {
    if (!py::isinstance<py::array>(h))
        throw py::type_error(std::string("ioattn.Mask.from_csr: ") + name +
                             " must be a numpy.ndarray of integers");
    const auto a = py::reinterpret_borrow<py::array>(h);
    const char kind = a.dtype().kind();
    if (kind != 'i' && kind != 'u')
        throw py::type_error(std::string("ioattn.Mask.from_csr: ") + name +
                             " must have an integer dtype (got " +
                             py::str(a.attr("dtype")).cast<std::string>() + ")");
    if (a.ndim() != 1)
        throw py::value_error(std::string("ioattn.Mask.from_csr: ") + name + " must be 1-D (got " +
                              std::to_string(a.ndim()) + "-D)");
    const auto v = py::array_t<std::int64_t, py::array::forcecast>::ensure(a);
    const auto r = v.unchecked<1>();
    Index out(static_cast<std::size_t>(r.shape(0)));
    for (py::ssize_t i = 0; i < r.shape(0); ++i)
        out[static_cast<std::size_t>(i)] = r(i);
    return out;
}

Mask from_csr(py::handle indptr, py::handle indices, std::pair<std::int64_t, std::int64_t> shape) {
    Index offsets = index_array(indptr, "indptr");
    Index cols = index_array(indices, "indices");
    py::gil_scoped_release release;
    return Mask(sparse::support_cache::csr(shape.first, shape.second, offsets, cols));
}

/// The support of a sparse operation, filed in the plan cache by content.
Mask kept(sparse::Support s) {
    return Mask(sparse::support_cache::intern(std::move(s)));
}

Mask from_dense(py::handle h) {
    if (!py::array_t<bool>::check_(h))
        throw py::type_error("ioattn.Mask.from_dense: the mask must be a boolean numpy.ndarray "
                             "(True = attend)");
    const auto a = py::reinterpret_borrow<py::array_t<bool>>(h);
    if (a.ndim() != 2)
        throw py::value_error("ioattn.Mask.from_dense: the mask must be 2-D (n_q, n_k), got " +
                              std::to_string(a.ndim()) + "-D");
    const auto r = a.unchecked<2>();
    Index offsets{0}, cols;
    for (py::ssize_t i = 0; i < r.shape(0); ++i) {
        for (py::ssize_t j = 0; j < r.shape(1); ++j)
            if (r(i, j))
                cols.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return Mask(sparse::support_cache::csr(r.shape(0), r.shape(1), offsets, cols));
}

Mask from_scipy(py::handle m) {
    const py::module_ sp = py::module_::import("scipy.sparse");
    if (!sp.attr("issparse")(m).cast<bool>())
        throw py::type_error("ioattn.Mask.from_scipy: expected a scipy.sparse matrix or array, "
                             "got " +
                             m.get_type().attr("__name__").cast<std::string>());
    const py::object csr = sp.attr("csr_matrix")(m, py::arg("copy") = true);
    csr.attr("sum_duplicates")(); // sorted, unique indices per row
    const auto shape = csr.attr("shape").cast<std::pair<std::int64_t, std::int64_t>>();
    return from_csr(csr.attr("indptr"), csr.attr("indices"), shape);
}

py::array_t<std::int64_t> numpy_copy(std::span<const std::int64_t> x) {
    return py::array_t<std::int64_t>(static_cast<py::ssize_t>(x.size()), x.data());
}

py::object to_scipy(const Mask& m) {
    const sparse::Support& s = m.support();
    const py::module_ np = py::module_::import("numpy");
    const py::object data = np.attr("ones")(s.z_qk(), py::arg("dtype") = "bool");
    return py::module_::import("scipy.sparse")
        .attr("csr_matrix")(
            py::make_tuple(data, numpy_copy(s.col_indices()), numpy_copy(s.row_offsets())),
            py::arg("shape") = py::make_tuple(s.n_q(), s.n_k()));
}

Mask from_spec(const std::string& spec,
               std::pair<std::int64_t, std::int64_t> shape,
               std::uint64_t seed) {
    py::gil_scoped_release release;
    return Mask(sparse::support_cache::pattern(spec, shape.first, shape.second, seed));
}

/// Mask.varlen: the lengths between consecutive offsets as a varlen spec (so the cache finds
/// it by spec), n = the last offset.
Mask from_cu_seqlens(const std::vector<std::int64_t>& cu_seqlens,
                     bool causal,
                     std::optional<std::int64_t> window) {
    constexpr const char* kWhere = "ioattn.Mask.varlen";
    if (cu_seqlens.size() < 2 || cu_seqlens.front() != 0)
        throw py::value_error(std::string(kWhere) +
                              ": cu_seqlens must start at 0 and hold at least two offsets "
                              "(0, then each sequence's end)");
    if (window && *window < 0)
        throw py::value_error(std::string(kWhere) + ": window = " + std::to_string(*window) +
                              " (expected >= 0 or None)");
    std::string spec = causal ? "causal-" : "";
    spec += window ? "window-varlen:" + std::to_string(*window) + ":" : "varlen:";
    for (std::size_t i = 1; i < cu_seqlens.size(); ++i) {
        if (cu_seqlens[i] < cu_seqlens[i - 1])
            throw py::value_error(std::string(kWhere) + ": cu_seqlens[" + std::to_string(i) +
                                  "] = " + std::to_string(cu_seqlens[i]) + " < cu_seqlens[" +
                                  std::to_string(i - 1) +
                                  "] = " + std::to_string(cu_seqlens[i - 1]) +
                                  " (offsets must not "
                                  "decrease)");
        spec += (i > 1 ? "," : "") + std::to_string(cu_seqlens[i] - cu_seqlens[i - 1]);
    }
    const std::int64_t n = cu_seqlens.back();
    py::gil_scoped_release release;
    return Mask(sparse::support_cache::pattern(spec, n, n, 0));
}

py::dict plan_cache_info() {
    const sparse::support_cache::Stats s = sparse::support_cache::stats();
    py::dict d;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["evictions"] = s.evictions;
    d["entries"] = s.entries;
    d["capacity"] = s.capacity;
    d["family_plans"] = s.family_plans;
    return d;
}

} // namespace

void register_mask(py::module_& m) {
    using Shape = std::pair<std::int64_t, std::int64_t>;
    py::class_<Mask>(m,
                     "Mask",
                     "The allowed (query, key) pairs of a sparse attention (True = "
                     "attend), shared by every batch and head; immutable.")
        .def(py::init(&from_spec),
             py::arg("spec"),
             py::arg("shape"),
             py::arg("seed") = 0,
             "From a spec string such as 'window:256+global:4' for shape (n_q, n_k); random "
             "terms use `seed`.")
        .def_static(
            "from_mtx",
            [](const std::string& path) {
                py::gil_scoped_release release;
                return kept(sparse::read_matrix_market(path));
            },
            py::arg("path"),
            "From a Matrix Market coordinate file (every stored entry allowed).")
        .def_static("from_csr",
                    &from_csr,
                    py::arg("indptr"),
                    py::arg("indices"),
                    py::arg("shape"),
                    "From CSR arrays: row i allows indices[indptr[i]:indptr[i+1]], sorted, "
                    "unique.")
        .def_static("from_scipy",
                    &from_scipy,
                    py::arg("matrix"),
                    "From a scipy.sparse matrix: every stored entry is allowed.")
        .def_static(
            "from_dense", &from_dense, py::arg("mask"), "From a 2-D boolean array, True = attend.")
        .def_static("varlen",
                    &from_cu_seqlens,
                    py::arg("cu_seqlens"),
                    py::arg("causal") = false,
                    py::arg("window") = py::none(),
                    "Packed variable-length sequences: sequence s holds positions "
                    "cu_seqlens[s]:cu_seqlens[s+1] and attends only within itself (causal: "
                    "to earlier positions; window w: within distance w); shape (n, n), n = "
                    "cu_seqlens[-1].")
        .def_property_readonly("nnz", [](const Mask& x) { return x.support().z_qk(); })
        .def_property_readonly("shape",
                               [](const Mask& x) {
                                   return Shape{x.support().n_q(), x.support().n_k()};
                               })
        .def_property_readonly("empty_rows", [](const Mask& x) { return x.support().empty_rows(); })
        .def_property_readonly("indptr",
                               [](const Mask& x) { return numpy_copy(x.support().row_offsets()); })
        .def_property_readonly("indices",
                               [](const Mask& x) { return numpy_copy(x.support().col_indices()); })
        .def("to_scipy", &to_scipy, "A scipy.sparse.csr_matrix of booleans.")
        .def("__and__",
             [](const Mask& a, const Mask& b) {
                 return kept(sparse::intersection_of(a.support(), b.support()));
             })
        .def("__or__",
             [](const Mask& a, const Mask& b) {
                 return kept(sparse::union_of(a.support(), b.support()));
             })
        .def("__eq__", [](const Mask& a, const Mask& b) { return a.support() == b.support(); })
        .def("__repr__",
             [](const Mask& x) {
                 return "ioattn.Mask(shape=(" + std::to_string(x.support().n_q()) + ", " +
                        std::to_string(x.support().n_k()) +
                        "), nnz=" + std::to_string(x.support().z_qk()) + ")";
             })
        .def(
            "_shares_plans",
            [](const Mask& a, const Mask& b) { return &a.support() == &b.support(); },
            "Whether both masks hold one support (and its plans): for the tests.");
    m.def(
        "set_plan_cache_size",
        [](std::size_t n) { sparse::support_cache::set_capacity(n); },
        py::arg("n"),
        "Keep at most n masks with their plans (0: no cache).");
    m.def("plan_cache_info",
          &plan_cache_info,
          "hits, misses, evictions, entries and capacity of the plan cache, and family_plans: "
          "the plans made by the decision kept for a spec drawn before with another seed.");
    m.def(
        "clear_plan_cache",
        [] { sparse::support_cache::clear(); },
        "Drop every kept mask, plan and spec family's decision and zero the counts.");
}

} // namespace ioattn::python
