#pragma once
// The bits of a run's outputs as one number: `ioattn run --json` reports it as "output_digest",
// so two builds (or two thread counts) can be shown to compute bitwise the same result.

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

namespace ioattn::app {

/// FNV-1a (64 bits) over the bytes of each array in turn, as 16 hex digits.
template <typename T>
std::string output_digest(std::initializer_list<const std::vector<T>*> arrays) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const std::vector<T>* a : arrays)
        for (const T& x : *a) {
            unsigned char bytes[sizeof(T)];
            std::memcpy(bytes, &x, sizeof(T));
            for (const unsigned char b : bytes)
                h = (h ^ b) * 0x100000001b3ULL;
        }
    std::ostringstream os;
    os << std::hex;
    os.width(16);
    os.fill('0');
    os << h;
    return os.str();
}

} // namespace ioattn::app
