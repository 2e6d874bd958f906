#pragma once
// The calls of ioattn._core: attention, attention_backward, io_count, bound and the timing
// helper of the benchmark. Each resolves its arguments under the GIL (dtype, shapes, views,
// options), releases the GIL while the library runs, and returns numpy arrays or dicts whose
// keys are those of `ioattn run --json`.

#include <pybind11/pybind11.h>

namespace ioattn::python {

namespace py = pybind11;

/// Adds attention, attention_backward, io_count, bound and _time_attention to the module.
void register_calls(py::module_& m);

} // namespace ioattn::python
