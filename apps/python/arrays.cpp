// numpy arrays as views (see arrays.hpp). An array is read in place when its strides are
// whole, non-negative elements, the last axis is unit-stride, rows do not overlap and the data
// is aligned; otherwise one packed copy is made, of that array only.

#include "arrays.hpp"

#include "output_pool.hpp"

#include <ioattn/resources.hpp>

#include <array>
#include <string>

namespace ioattn::python {

namespace {

std::string describe(py::handle h) {
    if (py::isinstance<py::array>(h))
        return py::str(h.attr("dtype")).cast<std::string>();
    return "a " + h.get_type().attr("__name__").cast<std::string>() + ", not a numpy.ndarray";
}

/// Element strides of [B][H][rows][cols] if the kernels can read `a` in place (axes of size
/// 1 get the stride a packed array has, which no element depends on).
template <typename Scalar>
bool readable(const py::array& a,
              bool lse,
              std::array<std::int64_t, 4>& shape,
              std::array<std::int64_t, 4>& stride) {
    const auto item = static_cast<py::ssize_t>(sizeof(Scalar));
    bool ok = a.attr("flags").attr("aligned").cast<bool>();
    for (int i = 0; i < 4; ++i) {
        const bool synthetic = lse && i == 3;
        shape[static_cast<std::size_t>(i)] = synthetic ? 1 : a.shape(i);
        const py::ssize_t bytes = synthetic ? item : a.strides(i);
        ok = ok && bytes >= 0 && bytes % item == 0;
        stride[static_cast<std::size_t>(i)] = bytes / item;
    }
    const std::int64_t rows = shape[2], cols = shape[3];
    if (cols == 1)
        stride[3] = 1;
    if (rows == 1)
        stride[2] = cols;
    if (shape[1] == 1)
        stride[1] = rows * stride[2];
    if (shape[0] == 1)
        stride[0] = shape[1] * stride[1];
    return ok && stride[3] == 1 && stride[2] >= cols;
}

} // namespace

Dtype common_dtype(const char* where, std::initializer_list<Named> arrays, bool is_bf16) {
    bool all32 = true, all64 = true, all16 = true;
    for (const auto& [name, h] : arrays) {
        all32 = all32 && py::array_t<float>::check_(h);
        all64 = all64 && py::array_t<double>::check_(h);
        all16 = all16 && py::array_t<std::int16_t>::check_(h);
    }
    if (is_bf16 && all16)
        return Dtype::bf16;
    if (!is_bf16 && (all32 || all64))
        return all32 ? Dtype::f32 : Dtype::f64;
    std::string got;
    for (const auto& [name, h] : arrays)
        got += (got.empty() ? "" : ", ") + std::string(name) + " " + describe(h);
    throw py::type_error(std::string(where) +
                         (is_bf16
                              ? ": the bf16 tensors must all be torch.bfloat16, never cast (got "
                              : ": the arrays must all be float32 or all float64 numpy arrays, "
                                "never cast (numpy has no bfloat16: pass torch.bfloat16 "
                                "tensors to ioattn.torch) (got ") +
                         got + ")");
}

void require_rank(const char* where, const Named& a, int rank, const char* layout) {
    const auto n = py::reinterpret_borrow<py::array>(a.second).ndim();
    if (n != rank)
        throw py::value_error(std::string(where) + ": " + a.first + " must be " +
                              std::to_string(rank) + "-D " + layout + " (got " + std::to_string(n) +
                              "-D)");
}

std::int64_t extent(py::handle a, int axis) {
    return py::reinterpret_borrow<py::array>(a).shape(axis);
}

bool in_place(py::handle a) {
    // int16: the bits of a torch.bfloat16 tensor, as ioattn.torch passes them
    const bool bits = py::array_t<std::int16_t>::check_(a);
    const Dtype t = common_dtype("ioattn._in_place", {{"a", a}}, bits);
    require_rank("ioattn._in_place", {"a", a}, 4, "[B, H, N, d]");
    std::array<std::int64_t, 4> shape{}, stride{};
    const auto x = py::reinterpret_borrow<py::array>(a);
    if (t == Dtype::bf16)
        return readable<bf16>(x, false, shape, stride);
    return t == Dtype::f32 ? readable<float>(x, false, shape, stride)
                           : readable<double>(x, false, shape, stride);
}

template <typename Scalar>
TensorView<const Scalar> Inputs<Scalar>::view(py::handle array, bool lse) {
    auto a = py::reinterpret_borrow<py::array>(array);
    std::array<std::int64_t, 4> shape{}, stride{};
    if (!readable<Scalar>(a, lse, shape, stride)) {
        a = py::module_::import("numpy").attr("array")(
            a, py::arg("copy") = true, py::arg("order") = "C");
        keep_.push_back(a);
        (void)readable<Scalar>(a, lse, shape, stride); // a fresh packed copy always is
    }
    TensorView<const Scalar> v{static_cast<const Scalar*>(a.data()),
                               shape[0],
                               shape[1],
                               shape[2],
                               shape[3],
                               stride[0],
                               stride[1],
                               stride[2],
                               0};
    v.extent = v.span();
    return v;
}

template <typename Scalar>
std::pair<py::array_t<NumpyOf<Scalar>>, TensorView<Scalar>>
output(const std::vector<py::ssize_t>& shape) {
    using T = NumpyOf<Scalar>;
    std::uint64_t bytes = sizeof(T); // saturated: numpy refuses a shape past memory itself
    for (const py::ssize_t n : shape)
        bytes = bytes_of(static_cast<std::int64_t>(n), static_cast<std::size_t>(bytes));
    py::array_t<T> a;
    if (bytes >= OutputPool::kMinBytes && bytes < (std::uint64_t{1} << 62)) { // output_pool.hpp
        OutputPool& pool = OutputPool::instance();
        void* data = pool.take(bytes);
        const py::capsule owner(data, [](void* p) { OutputPool::instance().give(p); });
        a = py::array_t<T>(shape, static_cast<T*>(data), owner);
    } else {
        a = py::array_t<T>(shape);
    }
    const auto at = [&](std::size_t i) {
        return i < shape.size() ? static_cast<std::int64_t>(shape[i]) : std::int64_t{1};
    };
    // bf16: the int16 array holds the bits (a layout-compatible 2-byte struct)
    auto* data = reinterpret_cast<Scalar*>(a.mutable_data());
    auto v = TensorView<Scalar>::packed(data, at(0), at(1), at(2), at(3));
    return {std::move(a), v};
}

template class Inputs<float>;
template class Inputs<double>;
template class Inputs<bf16>;
template class Inputs<fp16>;
template std::pair<py::array_t<float>, TensorView<float>>
output<float>(const std::vector<py::ssize_t>&);
template std::pair<py::array_t<double>, TensorView<double>>
output<double>(const std::vector<py::ssize_t>&);
template std::pair<py::array_t<std::int16_t>, TensorView<bf16>>
output<bf16>(const std::vector<py::ssize_t>&);

} // namespace ioattn::python
