// ioattn._core: the compiled part of the ioattn Python package (apps/python/ioattn/ is the
// rest). Maps the library's errors to Python: InvalidArgument -> ioattn.InvalidArgument (a
// ValueError), CapacityError -> ioattn.CapacityError and any other ioattn::Error ->
// ioattn.Error (RuntimeError subclasses), each with the library's message.

#include "calls.hpp"
#include "decode.hpp"
#include "mask.hpp"
#include "output_pool.hpp"

#include <ioattn/error.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/index_pool.hpp>

#include <pybind11/pybind11.h>

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
    m.doc() = "ioattn's compiled core: exact dense and sparse attention, forward and backward, "
              "with counted I/O. Use the ioattn package, not this module.";
    // translators registered later are tried first: the base class goes first
    const auto& error = py::register_exception<ioattn::Error>(m, "Error", PyExc_RuntimeError);
    py::register_exception<ioattn::InvalidArgument>(m, "InvalidArgument", PyExc_ValueError);
    py::register_exception<ioattn::CapacityError>(m, "CapacityError", error.ptr());
    m.def(
        "per_core_l2_words",
        [](int word_bytes) { return ioattn::MemoryModel::per_core_l2(word_bytes).fast_words; },
        py::arg("word_bytes"),
        "The default M: this machine's per-core L2 in words.");
    m.def(
        "max_threads",
        [] { return ioattn::max_concurrency(); },
        "Workers a call with num_threads=None may use.");
    using ioattn::python::OutputPool;
    OutputPool::instance(); // IOATTN_OUTPUT_POOL_MB is read (and refused) at import
    m.def(
        "set_output_pool_limit",
        [](std::size_t bytes) { OutputPool::instance().set_limit(bytes); },
        py::arg("bytes"),
        "Keep at most `bytes` of freed output arrays' memory for later calls (0: none).");
    m.def(
        "output_pool_info",
        [] {
            const OutputPool::Stats s = OutputPool::instance().stats();
            py::dict d;
            d["kept_bytes"] = s.kept_bytes;
            d["blocks"] = s.blocks;
            d["limit"] = s.limit;
            d["reused"] = s.reused;
            d["allocated"] = s.allocated;
            return d;
        },
        "kept_bytes, blocks, limit of the output pool, and how many blocks it reused and "
        "allocated.");
    m.def(
        "set_index_pool_limit",
        [](std::size_t bytes) { ioattn::sparse::set_index_pool_limit(bytes); },
        py::arg("bytes"),
        "Keep at most `bytes` of freed masks' index arrays for later masks (0: none).");
    m.def(
        "index_pool_info",
        [] {
            const ioattn::sparse::IndexPoolStats s = ioattn::sparse::index_pool_stats();
            py::dict d;
            d["kept_bytes"] = s.kept_bytes;
            d["arrays"] = s.arrays;
            d["limit"] = s.limit;
            d["reused"] = s.reused;
            return d;
        },
        "kept_bytes, arrays, limit of the index pool, and how many arrays it reused.");
    ioattn::python::register_mask(m);
    ioattn::python::register_calls(m);
    ioattn::python::register_decode(m);
}
