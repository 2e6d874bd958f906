// Tests of ioattn/kernels/workspace.hpp: zeroed slabs, and the per-thread block pool (best fit,
// a block keeps its size through take and give, so a small request never shrinks a big block;
// a full pool keeps its largest blocks).

#include <ioattn/kernels/workspace.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

using ioattn::kernels::ScratchPool;
using ioattn::kernels::Workspace;

TEST_CASE("Workspace: slabs are zeroed unless asked not to be, and aligned", "[workspace]") {
    {
        const Workspace<float> w(2, 100);
        for (int s = 0; s < 2; ++s) {
            CHECK(reinterpret_cast<std::uintptr_t>(w.slab(s)) % 64 == 0);
            for (int i = 0; i < 100; ++i)
                CHECK(w.slab(s)[i] == 0.0F);
            w.slab(s)[7] = 3.0F; // dirty the block for the next Workspace
        }
    }
    const Workspace<float> again(2, 100);
    CHECK(again.slab(0)[7] == 0.0F);
    CHECK(again.slab(1)[7] == 0.0F);
}

namespace {

/// What a sequence of takes and gives saw, run on a thread of its own: the pool is per thread,
/// so it starts empty whatever the tests before it left in this thread's pool. The checks run
/// after the join, on the test's thread.
template <typename F>
auto on_fresh_pool(F&& f) {
    decltype(f()) result;
    std::thread t([&] { result = f(); });
    t.join();
    return result;
}

} // namespace

TEST_CASE("ScratchPool: best fit, and a block keeps its size", "[workspace]") {
    struct Seen {
        std::size_t big_bytes = 0, small_bytes = 0, a_bytes = 0, b_bytes = 0, c_bytes = 0;
        bool a_is_small = false, b_is_big = false, c_is_big = false;
    };

    constexpr std::size_t kBig = (std::size_t{1} << 20) + 13, kSmall = 3079;
    const Seen seen = on_fresh_pool([] {
        Seen s;
        const auto [big, big_bytes] = ScratchPool::take(kBig);
        const auto [small, small_bytes] = ScratchPool::take(kSmall);
        s.big_bytes = big_bytes;
        s.small_bytes = small_bytes;
        ScratchPool::give(big, big_bytes);
        ScratchPool::give(small, small_bytes);
        const auto [a, a_bytes] = ScratchPool::take(kSmall); // the small block, not the big one
        s.a_is_small = a == small;
        s.a_bytes = a_bytes;
        const auto [b, b_bytes] = ScratchPool::take(kBig - 1000); // the big block, its full size
        s.b_is_big = b == big;
        s.b_bytes = b_bytes;
        ScratchPool::give(a, a_bytes);
        ScratchPool::give(b, b_bytes);
        const auto [c, c_bytes] = ScratchPool::take(kBig); // still whole after a smaller use
        s.c_is_big = c == big;
        s.c_bytes = c_bytes;
        ScratchPool::give(c, c_bytes);
        return s;
    });
    CHECK(seen.big_bytes == kBig);
    CHECK(seen.small_bytes == kSmall);
    CHECK(seen.a_is_small);
    CHECK(seen.a_bytes == kSmall);
    CHECK(seen.b_is_big);
    CHECK(seen.b_bytes == kBig);
    CHECK(seen.c_is_big);
    CHECK(seen.c_bytes == kBig);
}

TEST_CASE("ScratchPool: a full pool keeps its largest blocks", "[workspace]") {
    constexpr std::size_t kTiny = 211, kHuge = std::size_t{64} << 20; // never touched: no page

    struct Seen {
        std::size_t kept = 0, again_bytes = 0;
        bool again_is_huge = false;
    };

    const Seen seen = on_fresh_pool([] {
        Seen s;
        std::vector<std::pair<void*, std::size_t>> tiny;
        for (std::size_t i = 0; i < ScratchPool::kKeep; ++i)
            tiny.push_back(ScratchPool::take(kTiny + i));
        const auto [huge, huge_bytes] = ScratchPool::take(kHuge);
        for (const auto& [p, n] : tiny)
            ScratchPool::give(p, n); // the pool is full now
        ScratchPool::give(huge, huge_bytes);
        s.kept = ScratchPool::kept_bytes();
        const auto [again, again_bytes] = ScratchPool::take(kHuge);
        s.again_is_huge = again == huge;
        s.again_bytes = again_bytes;
        ScratchPool::give(again, again_bytes);
        return s;
    });
    CHECK(seen.kept >= kHuge); // kept; a smaller block was freed
    CHECK(seen.again_is_huge);
    CHECK(seen.again_bytes == kHuge);
}
