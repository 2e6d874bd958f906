#pragma once
// numpy arrays as the library's strided views: the working type the arrays of a call share
// (TypeError otherwise, never a cast), views taken in place when the kernels can read the
// layout, and packed copies only of the arrays they cannot (negative or fractional strides,
// a non-unit last stride, overlapping rows, misaligned data).

#include <ioattn/bf16.hpp>
#include <ioattn/fp16.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

namespace ioattn::python {

namespace py = pybind11;

/// The working type of a call: float32, float64, or bf16 (torch.bfloat16 tensors, which
/// ioattn.torch passes as int16 arrays of their bits; numpy itself has no bfloat16).
enum class Dtype { f32, f64, bf16 };

/// The numpy element type that holds a Scalar: Scalar, and int16 for the bits of bf16.
template <typename Scalar>
using NumpyOf = std::conditional_t<std::is_same_v<Scalar, bf16>, std::int16_t, Scalar>;

/// One named argument of a call.
using Named = std::pair<const char*, py::handle>;

/// The dtype every array shares. Throws py::type_error naming `where` unless each object is a
/// numpy.ndarray and all are float32 or all float64 (with `bf16`: all int16, the bits of
/// torch.bfloat16 tensors).
Dtype common_dtype(const char* where, std::initializer_list<Named> arrays, bool is_bf16 = false);

/// Throws py::value_error unless `a` has `rank` axes (`layout` names them in the message).
void require_rank(const char* where, const Named& a, int rank, const char* layout);

/// The size of axis `axis` of the ndarray `a`.
std::int64_t extent(py::handle a, int axis);

/// Whether Inputs::view reads the float32, float64 or (int16: bf16 bits) 4-D array `a` in
/// place (no copy).
bool in_place(py::handle a);

/// The arrays one call reads, as views of Scalar (or of bf16 or fp16, over 16-bit integer
/// arrays that hold their bits); keeps alive the copies it had to make.
template <typename Scalar>
class Inputs {
public:
    /// A read-only view of the 4-D array [B][H][rows][cols] (with `lse`, the 3-D [B][H][rows]
    /// as cols = 1), in place when the kernels can read its layout, else of a packed copy.
    TensorView<const Scalar> view(py::handle array, bool lse = false);

private:
    std::vector<py::array> keep_;
};

/// A new C-contiguous array of the given shape and its view as [B][H][rows][cols]
/// (a 3-D shape: cols = 1).
template <typename Scalar>
std::pair<py::array_t<NumpyOf<Scalar>>, TensorView<Scalar>>
output(const std::vector<py::ssize_t>& shape);

extern template class Inputs<float>;
extern template class Inputs<double>;
extern template class Inputs<bf16>;
extern template class Inputs<fp16>;

} // namespace ioattn::python
