#pragma once
// ioattn.Mask: a support (the allowed (query, key) pairs, sparse::Support) built once from a
// spec string, a Matrix Market file, CSR arrays, a scipy.sparse matrix or a boolean array, and
// shared by every call that uses it. Immutable, so concurrent calls may share one.

#include <ioattn/sparse/support.hpp>

#include <memory>
#include <utility>

#include <pybind11/pybind11.h>

namespace ioattn::python {

namespace py = pybind11;

class Mask {
public:
    explicit Mask(sparse::Support support)
        : support_(std::make_shared<const sparse::Support>(std::move(support))) {}

    [[nodiscard]] const sparse::Support& support() const { return *support_; }

private:
    std::shared_ptr<const sparse::Support> support_;
};

/// Adds ioattn._core.Mask to the module.
void register_mask(py::module_& m);

} // namespace ioattn::python
