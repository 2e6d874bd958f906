// Tests of ioattn::MemoryModel.

#include <ioattn/error.hpp>
#include <ioattn/memory_model.hpp>

#include <catch2/catch.hpp>

using ioattn::InvalidArgument;
using ioattn::MemoryModel;

TEST_CASE("MemoryModel::per_core_l2 converts the L2 size into words", "[memory_model]") {
    const std::int64_t bytes = ioattn::l2_cache_bytes();
    CHECK(bytes >= 0);
    const std::int64_t expect = bytes > 0 ? bytes : 1024 * 1024;
    CHECK(MemoryModel::per_core_l2(1).fast_words == expect);
    CHECK(MemoryModel::per_core_l2(4).fast_words == expect / 4);
    CHECK(MemoryModel::per_core_l2(8).fast_words == expect / 8);
    CHECK(MemoryModel::per_core_l2().fast_words == expect / 4);
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
