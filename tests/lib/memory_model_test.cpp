// Tests of ioattn::MemoryModel.

#include <ioattn/error.hpp>
#include <ioattn/memory_model.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

using ioattn::InvalidArgument;
using ioattn::MemoryModel;

TEST_CASE("MemoryModel::per_core_l2 converts the L2 size into words", "[memory_model]") {
    // the L2 size as glibc reads it from CPUID, independently of the library's sysfs reading;
    // where neither knows it, the library's documented 1 MiB
    const long known = sysconf(_SC_LEVEL2_CACHE_SIZE);
    const std::int64_t read = ioattn::l2_cache_bytes();
    CAPTURE(known, read);
    if (known > 0 && read > 0)
        CHECK(read == known);
    const std::int64_t bytes = read > 0 ? read : known > 0 ? known : 1024 * 1024;
    if (read <= 0)
        CHECK(MemoryModel::per_core_l2(1).fast_words == 1024 * 1024);
    else
        CHECK(MemoryModel::per_core_l2(1).fast_words == bytes);
    CHECK(MemoryModel::per_core_l2(4).fast_words == MemoryModel::per_core_l2(1).fast_words / 4);
    CHECK(MemoryModel::per_core_l2(8).fast_words == MemoryModel::per_core_l2(1).fast_words / 8);
    CHECK(MemoryModel::per_core_l2().fast_words == MemoryModel::per_core_l2(4).fast_words);
    CHECK_THROWS_AS(MemoryModel::per_core_l2(0), InvalidArgument);
}

TEST_CASE("MemoryModel::validate", "[memory_model][throws]") {
    CHECK_NOTHROW(MemoryModel{1}.validate("x"));
    CHECK_THROWS_AS(MemoryModel{0}.validate("x"), InvalidArgument);
    CHECK_THROWS_AS(MemoryModel{-5}.validate("x"), InvalidArgument);
    CHECK_THROWS_WITH(MemoryModel{-5}.validate("callee"),
                      Catch::Contains("callee") && Catch::Contains("-5"));
}

TEST_CASE("MemoryModel::for_cache plans for half a real cache", "[memory_model][throws]") {
    // the slack an LRU cache needs to move the counted words (bench/cache_validate.py)
    CHECK(ioattn::kCacheSlack == 2);
    CHECK(MemoryModel::for_cache(512 * 1024, 4).fast_words == 64 * 1024);
    CHECK(MemoryModel::for_cache(512 * 1024, 8).fast_words == 32 * 1024);
    CHECK(MemoryModel::for_cache(9, 4).fast_words == 1);
    CHECK_THROWS_AS(MemoryModel::for_cache(7, 4), InvalidArgument);
    CHECK_THROWS_WITH(MemoryModel::for_cache(7, 4),
                      Catch::Contains("for_cache") && Catch::Contains("7 bytes"));
    CHECK_THROWS_AS(MemoryModel::for_cache(1024, 0), InvalidArgument);
}
