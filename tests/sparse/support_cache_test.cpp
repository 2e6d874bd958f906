// Tests of the plan cache (sparse/include/ioattn/sparse/support_cache.hpp): a spec or CSR
// content given again is a hit returning the same support (so the plans kept with it are not
// rebuilt), other shapes, seeds or contents are misses, the least recently used entry is
// evicted beyond the capacity, a request require_memory would refuse drops every entry
// first, capacity 0 turns the cache off, and attention over a cached
// support equals attention over one built afresh, bitwise. A spec drawn with another seed is
// planned by its family's decision, as a fresh planning of it plans, and computes alike.

#include "kernel_case.hpp"
#include "scoped_env.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/error.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/support_cache.hpp>
#include <ioattn/sparse/variants.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cache = ioattn::sparse::support_cache;
namespace sp = ioattn::sparse;

namespace {

/// Empties the cache with `capacity` for one test and restores the capacity after.
class FreshCache {
public:
    explicit FreshCache(std::size_t capacity)
        : old_(cache::capacity()) {
        cache::clear();
        cache::set_capacity(capacity);
    }

    ~FreshCache() {
        cache::clear();
        cache::set_capacity(old_);
    }

    FreshCache(const FreshCache&) = delete;
    FreshCache& operator=(const FreshCache&) = delete;

private:
    std::size_t old_;
};

} // namespace

TEST_CASE("a spec given again is a hit on the same support", "[cache]") {
    const FreshCache fresh(4);
    const auto a = cache::pattern("window:3+global:1", 40, 40, 0);
    CHECK(cache::stats().misses == 1);
    CHECK(cache::stats().hits == 0);
    const auto b = cache::pattern("window:3+global:1", 40, 40, 0);
    CHECK(a.get() == b.get());
    CHECK(cache::stats().hits == 1);
    CHECK(*a == sp::parse_pattern("window:3+global:1", 40, 40, 0));
    // the plans kept with the support are shared through the hit
    CHECK(&a->cached_block_keys(8) == &b->cached_block_keys(8));
    // another shape or seed is a miss
    CHECK(cache::pattern("window:3+global:1", 40, 41, 0).get() != a.get());
    CHECK(cache::pattern("random:0.2", 40, 40, 1).get() !=
          cache::pattern("random:0.2", 40, 40, 2).get());
    CHECK(cache::stats().hits == 1);
    CHECK(cache::stats().misses == 4);
}

TEST_CASE("CSR content given again is a hit, by spec or by arrays", "[cache]") {
    const FreshCache fresh(4);
    const sp::Support w = sp::pattern_window(30, 30, 2);
    const auto by_spec = cache::pattern("window:2", 30, 30, 0);
    const auto by_csr = cache::csr(30, 30, w.row_offsets(), w.col_indices());
    CHECK(by_csr.get() == by_spec.get());
    CHECK(cache::stats().hits == 1);
    // the same content under another spec is built, then found by content
    const auto other = cache::pattern("window:2 & dense", 30, 30, 0);
    CHECK(other.get() == by_spec.get());
    CHECK(cache::stats().entries == 1);
    // one pair less is another support
    std::vector<std::int64_t> offsets(w.row_offsets().begin(), w.row_offsets().end());
    std::vector<std::int64_t> cols(w.col_indices().begin(), w.col_indices().end());
    cols.pop_back();
    --offsets.back();
    const auto fewer = cache::csr(30, 30, offsets, cols);
    CHECK(fewer.get() != by_spec.get());
    CHECK(fewer->z_qk() == w.z_qk() - 1);
    // a bad CSR throws and keeps nothing
    cols.back() = 99;
    CHECK_THROWS_AS(cache::csr(30, 30, offsets, cols), ioattn::InvalidArgument);
    CHECK(cache::stats().entries == 2);
}

TEST_CASE("the least recently used entry is evicted beyond the capacity", "[cache]") {
    const FreshCache fresh(2);
    const auto a = cache::pattern("window:1", 20, 20, 0);
    const auto b = cache::pattern("window:2", 20, 20, 0);
    CHECK(cache::pattern("window:1", 20, 20, 0).get() == a.get()); // a is now the most recent
    (void)cache::pattern("window:3", 20, 20, 0);                   // evicts b
    CHECK(cache::stats().evictions == 1);
    CHECK(cache::stats().entries == 2);
    CHECK(cache::pattern("window:1", 20, 20, 0).get() == a.get());
    const std::size_t misses = cache::stats().misses;
    CHECK(cache::pattern("window:2", 20, 20, 0).get() != b.get()); // rebuilt
    CHECK(cache::stats().misses == misses + 1);
    cache::set_capacity(1); // shrinking evicts down to the new capacity
    CHECK(cache::stats().entries == 1);
}

TEST_CASE("a request require_memory would refuse drops every entry first", "[cache]") {
    const FreshCache fresh(4);
    auto held = cache::pattern("window:1", 20, 20, 0);
    (void)cache::pattern("window:2", 20, 20, 0);
    REQUIRE(cache::stats().entries == 2);
    ioattn::require_memory("test", 1024, "bytes"); // fits: nothing is dropped
    CHECK(cache::stats().entries == 2);
    {
        const ioattn::test::ScopedEnv limit("IOATTN_MAX_BYTES", "1M");
        CHECK_THROWS_AS(ioattn::require_memory("test", 2 << 20, "bytes"), ioattn::ResourceError);
    }
    CHECK(cache::stats().entries == 0);
    CHECK(cache::stats().evictions == 2);
    CHECK(cache::capacity() == 4);
    // a support a caller still holds stays whole, and is built anew when asked for again
    CHECK(*held == sp::pattern_window(20, 20, 1));
    CHECK(cache::pattern("window:1", 20, 20, 0).get() != held.get());
}

TEST_CASE("capacity 0 turns the cache off", "[cache]") {
    const FreshCache fresh(0);
    const auto a = cache::pattern("causal", 16, 16, 0);
    const auto b = cache::pattern("causal", 16, 16, 0);
    CHECK(a.get() != b.get());
    CHECK(*a == *b);
    CHECK(cache::stats().hits == 0);
    CHECK(cache::stats().entries == 0);
}

TEST_CASE("attention over a cached support equals one built afresh, bitwise", "[cache]") {
    const FreshCache fresh(4);
    const ioattn::Problem p = sp::test::kernel_shape(1, 200, 200, 16);
    const std::string spec = "window:20+global:3";
    const auto first = cache::pattern(spec, p.n_q, p.n_k, 0);
    sp::test::Case<float> warm(p, 9);
    ioattn::Structure<float> st;
    st.support = first.get();
    (void)ioattn::attention(warm.forward(), st); // plans, kept with the support
    const auto again = cache::pattern(spec, p.n_q, p.n_k, 0);
    REQUIRE(again.get() == first.get());
    sp::test::Case<float> cached(p, 9);
    st.support = again.get();
    (void)ioattn::attention(cached.forward(), st);
    const sp::Support afresh = sp::parse_pattern(spec, p.n_q, p.n_k, 0);
    sp::test::Case<float> plain(p, 9);
    st.support = &afresh;
    (void)ioattn::attention(plain.forward(), st);
    CHECK(cached.o == plain.o);
    CHECK(cached.lse == plain.lse);
    CHECK(warm.o == plain.o);
}

TEST_CASE("a spec drawn with another seed is planned by its family's decision", "[cache]") {
    const FreshCache fresh(8);
    const ioattn::Problem p = sp::test::kernel_shape(1, 640, 640, 16);
    const auto& ample = sp::test::kAmple;
    for (const std::string spec : {"random:0.05", "window:8+random:0.01", "bigbird:8:1:2"}) {
        for (const ioattn::Pass pass : {ioattn::Pass::forward, ioattn::Pass::backward}) {
            CAPTURE(spec, pass == ioattn::Pass::forward);
            cache::clear();
            const auto first = cache::pattern(spec, p.n_q, p.n_k, 1);
            const auto second = cache::pattern(spec, p.n_q, p.n_k, 2);
            REQUIRE(first->family() != nullptr);
            CHECK(first->family() == second->family());
            CHECK(*first != *second);
            (void)sp::plan_variants<float>(p, *first, ample, pass); // fresh: the decision kept
            CHECK(cache::stats().family_plans == 0);
            const auto decided = sp::plan_variants<float>(p, *second, ample, pass);
            CHECK(cache::stats().family_plans == 1);
            // the plan a fresh planning of the second structure makes, outside any family
            const sp::Support alone = sp::parse_pattern(spec, p.n_q, p.n_k, 2);
            REQUIRE(alone.family() == nullptr);
            const auto planned = sp::plan_variants<float>(p, alone, ample, pass);
            CHECK(decided.tile == planned.tile);
            CHECK(decided.variant == planned.variant);
            CHECK(decided.inner == planned.inner);
            CHECK(decided.tile_pairs == planned.tile_pairs);
            CHECK(decided.element_pairs == planned.element_pairs);
            CHECK(decided.tile_blocks == planned.tile_blocks);
            CHECK(decided.element_blocks == planned.element_blocks);
            CHECK(decided.split_blocks == planned.split_blocks);
            CHECK(decided.element == planned.element);
            CHECK(cache::stats().family_plans == 1);
            if (pass == ioattn::Pass::forward) { // and computes as it does, bitwise
                sp::test::Case<float> a(p, 4), b(p, 4);
                ioattn::NullCounter none;
                sp::forward(a.forward(), *second, decided, ample, none);
                sp::forward(b.forward(), alone, planned, ample, none);
                CHECK(a.o == b.o);
                CHECK(a.lse == b.lse);
            }
        }
    }
    // another shape, spec or seedless call has a family of its own; clear() forgets them
    const auto a = cache::pattern("random:0.05", 640, 640, 1);
    CHECK(cache::pattern("random:0.05", 640, 641, 1)->family() != a->family());
    CHECK(cache::pattern("random:0.06", 640, 640, 1)->family() != a->family());
    cache::clear();
    CHECK(cache::stats().family_plans == 0);
    CHECK(cache::pattern("random:0.05", 640, 640, 3)->family() != a->family());
}

TEST_CASE("content_hash depends on the shape and every index", "[cache]") {
    const std::vector<std::int64_t> off{0, 2, 3}, cols{0, 1, 1};
    const std::uint64_t h = cache::content_hash(2, 2, off, cols);
    CHECK(h == cache::content_hash(2, 2, off, cols));
    CHECK(h != cache::content_hash(2, 3, off, cols));
    CHECK(h != cache::content_hash(2, 2, off, std::vector<std::int64_t>{0, 1, 0}));
    CHECK(h != cache::content_hash(2, 2, std::vector<std::int64_t>{0, 1, 3}, cols));
}
