#pragma once
// ioattn.Mask: a support (the allowed (query, key) pairs, sparse::Support) built once from a
// spec string, a Matrix Market file, CSR arrays, a scipy.sparse matrix, a boolean array or
// packed sequence offsets (cu_seqlens), and shared by every call that uses it. Immutable, so
// concurrent calls may share one. Every Mask's support comes through the plan cache
// (ioattn/sparse/support_cache.hpp): a Mask built again with the same content shares the
// support, and the plans kept with it, of the one built before.

#include <ioattn/sparse/support.hpp>

#include <memory>
#include <utility>

#include <pybind11/pybind11.h>

namespace ioattn::python {

namespace py = pybind11;

class Mask {
public:
    explicit Mask(std::shared_ptr<const sparse::Support> support)
        : support_(std::move(support)) {}

    [[nodiscard]] const sparse::Support& support() const { return *support_; }

private:
    std::shared_ptr<const sparse::Support> support_;
};

/// Adds ioattn._core.Mask to the module.
void register_mask(py::module_& m);

} // namespace ioattn::python
