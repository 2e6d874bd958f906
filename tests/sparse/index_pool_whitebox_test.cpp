// Tests of the index pool (sparse/include/ioattn/sparse/index_pool.hpp,
// sparse/src/support/index_pool.hpp): a freed support's large arrays are kept and the next
// support with room in them is built on them, equal to one built without the pool; a taken
// array is the kept storage at the size asked, up to any size its room allows (zeros past the
// words it held); arrays shorter than the request or over twice as long are not taken, nor
// short ones kept, nor arrays index_words did not allocate (a support's copy); the limit bounds
// what is kept and 0 keeps nothing; a request require_memory refuses frees what the pool keeps
// first.

#include "scoped_env.hpp"
#include "support/index_pool.hpp"

#include <ioattn/error.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/index_pool.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sp = ioattn::sparse;
namespace detail = ioattn::sparse::detail;

namespace {

/// Empties the pool at a limit for one test and restores the limit after.
class FreshPool {
public:
    explicit FreshPool(std::size_t limit)
        : old_(sp::index_pool_stats().limit) {
        sp::set_index_pool_limit(0);
        sp::set_index_pool_limit(limit);
    }

    FreshPool(const FreshPool&) = delete;
    FreshPool& operator=(const FreshPool&) = delete;

    ~FreshPool() { sp::set_index_pool_limit(old_); }

private:
    std::size_t old_;
};

constexpr std::int64_t kWords = detail::kPoolMinWords;

/// n words of `value`, noted as index_words notes its arrays (so the pool may keep them).
std::vector<std::int64_t> filled(std::int64_t n, std::int64_t value) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n), value);
    detail::note_fresh_array(v.data());
    return v;
}

} // namespace

TEST_CASE("a freed support's columns build the next support", "[sparse][index_pool]") {
    const FreshPool pool(sp::kDefaultIndexPoolBytes);
    // 4096 x 257 = 1,052,672 column words: over kPoolMinWords
    const sp::Support expected = [] {
        sp::set_index_pool_limit(0);
        sp::Support s = sp::pattern_window(4096, 4096, 128);
        return s;
    }();
    sp::set_index_pool_limit(sp::kDefaultIndexPoolBytes);
    REQUIRE(expected.z_qk() > kWords);
    { const sp::Support first = sp::pattern_window(4096, 4096, 128); }
    const sp::IndexPoolStats kept = sp::index_pool_stats();
    CHECK(kept.arrays == 1);
    CHECK(kept.kept_bytes >= static_cast<std::size_t>(expected.z_qk()) * sizeof(std::int64_t));
    const sp::Support again = sp::pattern_window(4096, 4096, 128);
    CHECK(sp::index_pool_stats().reused == kept.reused + 1);
    CHECK(sp::index_pool_stats().arrays == 0);
    CHECK(again == expected);
    { const sp::Support copy = again; } // a copy's arrays: 4 KiB pages, not kept
    CHECK(sp::index_pool_stats().arrays == 0);
}

TEST_CASE("a taken array is the kept one, at the size asked", "[sparse][index_pool]") {
    const FreshPool pool(sp::kDefaultIndexPoolBytes);
    std::vector<std::int64_t> v = filled(2 * kWords, 7);
    const std::int64_t* storage = v.data();
    detail::give_index_array(v);
    CHECK(v.empty());
    // not zeroed: its taker (index_words) writes every word
    const std::vector<std::int64_t> t = detail::take_index_array(kWords + 3);
    REQUIRE(t.size() == static_cast<std::size_t>(kWords + 3));
    CHECK(t.data() == storage);
    // room past its words (as index_words leaves): a longer request fits, zeros past them
    std::vector<std::int64_t> w;
    w.reserve(static_cast<std::size_t>(2 * kWords));
    w.assign(static_cast<std::size_t>(kWords), 7);
    detail::note_fresh_array(w.data());
    detail::give_index_array(w);
    const std::vector<std::int64_t> u = detail::take_index_array(kWords + kWords / 2);
    REQUIRE(u.size() == static_cast<std::size_t>(kWords + kWords / 2));
    CHECK(std::all_of(u.begin() + kWords, u.end(), [](std::int64_t x) { return x == 0; }));
}

TEST_CASE("arrays of the wrong size are neither kept nor taken", "[sparse][index_pool]") {
    const FreshPool pool(sp::kDefaultIndexPoolBytes);
    std::vector<std::int64_t> small = filled(kWords - 1, 1);
    detail::give_index_array(small);
    CHECK(sp::index_pool_stats().arrays == 0);
    std::vector<std::int64_t> v = filled(3 * kWords, 1);
    detail::give_index_array(v);
    REQUIRE(sp::index_pool_stats().arrays == 1);
    CHECK(detail::take_index_array(kWords).empty());         // 3n: over twice as long
    CHECK(detail::take_index_array(3 * kWords + 1).empty()); // shorter than asked
    CHECK(detail::take_index_array(kWords / 2).empty());     // a short request: never pooled
    CHECK(detail::take_index_array(2 * kWords).size() == static_cast<std::size_t>(2 * kWords));
}

TEST_CASE("the limit bounds what is kept, the largest first", "[sparse][index_pool]") {
    const std::size_t bytes = static_cast<std::size_t>(kWords) * sizeof(std::int64_t);
    const FreshPool pool(3 * bytes + 64);
    for (const std::int64_t n : {kWords, 2 * kWords}) {
        std::vector<std::int64_t> v = filled(n, 1);
        detail::give_index_array(v);
    }
    CHECK(sp::index_pool_stats().arrays == 2);
    std::vector<std::int64_t> v = filled(kWords + 1, 1); // over the limit: the smallest goes
    detail::give_index_array(v);
    CHECK(sp::index_pool_stats().arrays == 2);
    CHECK(sp::index_pool_stats().kept_bytes == 3 * bytes + sizeof(std::int64_t));
    CHECK(detail::take_index_array(2 * kWords).size() == static_cast<std::size_t>(2 * kWords));
    sp::set_index_pool_limit(0);
    CHECK(sp::index_pool_stats().arrays == 0);
    CHECK(sp::index_pool_stats().kept_bytes == 0);
    std::vector<std::int64_t> w = filled(kWords, 1);
    detail::give_index_array(w);
    CHECK(sp::index_pool_stats().arrays == 0);
}

TEST_CASE("memory pressure frees what the pool keeps", "[sparse][index_pool]") {
    const FreshPool pool(sp::kDefaultIndexPoolBytes);
    std::vector<std::int64_t> v = filled(kWords, 1);
    detail::give_index_array(v);
    REQUIRE(sp::index_pool_stats().arrays == 1);
    ioattn::require_memory("test", 1024, "bytes"); // fits: nothing is freed
    CHECK(sp::index_pool_stats().arrays == 1);
    {
        const ioattn::test::ScopedEnv limit("IOATTN_MAX_BYTES", "1M");
        CHECK_THROWS_AS(ioattn::require_memory("test", 2 << 20, "bytes"), ioattn::ResourceError);
    }
    CHECK(sp::index_pool_stats().arrays == 0);
    CHECK(sp::index_pool_stats().kept_bytes == 0);
    CHECK(sp::index_pool_stats().limit == sp::kDefaultIndexPoolBytes);
}
