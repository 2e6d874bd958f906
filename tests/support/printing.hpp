#pragma once
// How Catch2 prints ioattn values in CAPTURE/INFO (independent of the library's operator<<, so
// a broken printer cannot hide a failing count).

#include <ioattn/io_counter.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace Catch {

template <>
struct StringMaker<ioattn::IoReport> {
    static std::string convert(const ioattn::IoReport& r) {
        return "{reads " + std::to_string(r.reads) + ", writes " + std::to_string(r.writes) +
               ", peak " + std::to_string(r.peak) + "}";
    }
};

} // namespace Catch
