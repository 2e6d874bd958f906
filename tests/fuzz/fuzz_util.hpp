#pragma once
// Shared by the libFuzzer targets of tests/fuzz: a memory limit for the library's own checks
// (IOATTN_MAX_BYTES, so that an input asking for gigabytes is refused by ioattn instead of
// tripping libFuzzer's malloc limit), a private scratch directory, and FUZZ_CHECK, which turns
// a violated property into a crash that libFuzzer reports and saves.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <unistd.h>

namespace ioattn::fuzz {

/// The budget every target gives the library: far below libFuzzer's 2 GiB RSS and malloc limit.
inline constexpr const char* kMaxBytes = "256M";

/// Sets IOATTN_MAX_BYTES unless the caller set it.
inline void init() {
    ::setenv("IOATTN_MAX_BYTES", kMaxBytes, 0);
}

/// A directory of this process, removed at exit.
inline const std::filesystem::path& scratch_dir() {
    struct Dir {
        std::filesystem::path path;

        Dir() {
            std::string pattern =
                (std::filesystem::temp_directory_path() / "ioattn_fuzz.XXXXXX").string();
            if (::mkdtemp(pattern.data()) == nullptr)
                std::abort();
            path = pattern;
        }

        ~Dir() {
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
        }

        Dir(const Dir&) = delete;
        Dir& operator=(const Dir&) = delete;
    };

    static const Dir dir;
    return dir.path;
}

/// Writes `size` bytes to scratch_dir() / name and returns the path.
inline std::string write_scratch(const char* name, const std::uint8_t* data, std::size_t size) {
    const std::string path = (scratch_dir() / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path;
}

} // namespace ioattn::fuzz

/// A property every input must keep: on failure, prints it and aborts (a libFuzzer crash).
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
            std::abort();                                                                          \
        }                                                                                          \
    } while (false)
