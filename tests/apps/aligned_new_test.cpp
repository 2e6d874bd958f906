// Tests of the program's operator new (measure/aligned_new.cpp, compiled into this test as into the
// program): blocks of 4 KiB and more start on a 64-byte boundary, blocks of 4 MiB and more on a
// 2 MiB boundary (so that the huge pages they are advised to cover them from their first byte);
// a size no allocator can give is std::bad_alloc, or nullptr from the nothrow form. Under a
// sanitizer the runtime's own operator new stays, and both cases are skipped.

#include "sanitized.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <vector>

namespace {

#if defined(IOATTN_SANITIZED)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::uintptr_t address_of(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p);
}

} // namespace

TEST_CASE("operator new: 64-byte boundaries from 4 KiB, 2 MiB boundaries from 4 MiB",
          "[aligned_new]") {
    if (kSanitized) {
        WARN("the sanitizer's operator new is in use: boundaries not checked");
        return;
    }
    for (const std::size_t bytes : {std::size_t{4096}, std::size_t{100003}, 4 * kMiB - 1}) {
        CAPTURE(bytes);
        void* p = ::operator new(bytes);
        CHECK(address_of(p) % 64 == 0);
        ::operator delete(p);
    }
    for (const std::size_t bytes : {4 * kMiB, 5 * kMiB + 3, 64 * kMiB}) {
        CAPTURE(bytes);
        void* p = ::operator new[](bytes);
        CHECK(address_of(p) % (2 * kMiB) == 0);
        static_cast<unsigned char*>(p)[bytes - 1] = 1; // the whole block is usable
        ::operator delete[](p);
    }
    // the program's operands: K of N = 16384, d = 64 in fp32 is 4 MiB
    const std::vector<float> k(std::size_t{16384} * 64, 1.0F);
    CHECK(address_of(k.data()) % (2 * kMiB) == 0);
}

TEST_CASE("operator new: an impossible size is bad_alloc, or nullptr when nothrow",
          "[aligned_new]") {
    if (kSanitized) { // the sanitizer's allocator reports such a size and stops instead
        WARN("the sanitizer's operator new is in use: failure path not checked");
        return;
    }
    const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
    CHECK_THROWS_AS(::operator new(huge), std::bad_alloc);
    CHECK(::operator new(huge, std::nothrow) == nullptr);
}
