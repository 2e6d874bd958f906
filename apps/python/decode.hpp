#pragma once
// ioattn._core.decode: ioattn::decode (ioattn/decode.hpp) over numpy
// arrays. The package's ioattn.decode (apps/python/ioattn/__init__.py) turns torch tensors
// into these arrays without copies (a torch.bfloat16 cache as its 16-bit integer view).

#include <pybind11/pybind11.h>

namespace ioattn::python {

namespace py = pybind11;

/// Adds decode to the module.
void register_decode(py::module_& m);

} // namespace ioattn::python
