#pragma once
// ioattn._core.io_count and ioattn._core.bound: the entry point's plan, its dry-run I/O and
// the lower bounds of a problem given by its sizes, as dicts with the keys of
// `ioattn run --json` (problem keys, schedule, selected_by, M, tiling, bound, io).

#include <pybind11/pybind11.h>

namespace ioattn::python {

namespace py = pybind11;

/// Adds io_count and bound to the module.
void register_reports(py::module_& m);

} // namespace ioattn::python
