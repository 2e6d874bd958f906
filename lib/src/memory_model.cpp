// ioattn::MemoryModel: the default fast memory is this machine's per-core L2, from sysfs.

#include <ioattn/error.hpp>
#include <ioattn/memory_model.hpp>

#include <fstream>
#include <string>

namespace ioattn {

namespace {

/// Parses sysfs cache sizes such as "2048K" or "4M".
std::int64_t parse_size(const std::string& text) {
    std::size_t pos = 0;
    std::int64_t value = 0;
    try {
        value = std::stoll(text, &pos);
    } catch (const std::exception&) {
        return 0;
    }
    if (pos < text.size()) {
        switch (text[pos]) {
        case 'K':
            value *= 1024;
            break;
        case 'M':
            value *= 1024 * 1024;
            break;
        case 'G':
            value *= 1024 * 1024 * 1024;
            break;
        default:
            break;
        }
    }
    return value;
}

std::string read_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

} // namespace

std::int64_t l2_cache_bytes() {
    // read once: every planned call asks, and the files cost more than a small decode step
    static const std::int64_t bytes = [] {
        const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
        for (int i = 0; i < 8; ++i) {
            const std::string dir = base + std::to_string(i) + "/";
            if (read_line(dir + "level") == "2" && read_line(dir + "type") != "Instruction")
                return parse_size(read_line(dir + "size"));
        }
        return std::int64_t{0};
    }();
    return bytes;
}

MemoryModel MemoryModel::per_core_l2(std::int64_t bytes_per_word) {
    if (bytes_per_word < 1)
        throw InvalidArgument("ioattn::MemoryModel::per_core_l2: bytes_per_word = " +
                              std::to_string(bytes_per_word) + " (expected >= 1)");
    std::int64_t bytes = l2_cache_bytes();
    if (bytes <= 0)
        bytes = 1024 * 1024;
    return MemoryModel{bytes / bytes_per_word};
}

MemoryModel MemoryModel::for_cache(std::int64_t cache_bytes, std::int64_t bytes_per_word) {
    if (bytes_per_word < 1)
        throw InvalidArgument("ioattn::MemoryModel::for_cache: bytes_per_word = " +
                              std::to_string(bytes_per_word) + " (expected >= 1)");
    const std::int64_t words = cache_bytes / bytes_per_word / kCacheSlack;
    if (words < 1)
        throw InvalidArgument("ioattn::MemoryModel::for_cache: a cache of " +
                              std::to_string(cache_bytes) +
                              " bytes leaves M = " + std::to_string(words) + " words of " +
                              std::to_string(bytes_per_word) + " bytes (expected >= 1)");
    return MemoryModel{words};
}

void MemoryModel::validate(const char* where) const {
    if (fast_words < 1)
        throw InvalidArgument(std::string(where) + ": M = " + std::to_string(fast_words) +
                              " words (expected >= 1)");
}

} // namespace ioattn
