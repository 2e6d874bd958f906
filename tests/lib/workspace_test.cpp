// Tests of ioattn/kernels/workspace.hpp: zeroed slabs, and the per-thread block pool (best fit,
// a block keeps its size through take and give, so a small request never shrinks a big block;
// a full pool keeps its largest blocks).

#include <ioattn/kernels/workspace.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
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

TEST_CASE("ScratchPool: best fit, and a block keeps its size", "[workspace]") {
    // sizes no other block of this thread's pool has (it may hold blocks of earlier tests)
    constexpr std::size_t kBig = (std::size_t{1} << 20) + 13, kSmall = 3079;
    const auto [big, big_bytes] = ScratchPool::take(kBig);
    const auto [small, small_bytes] = ScratchPool::take(kSmall);
    CHECK(big_bytes == kBig);
    CHECK(small_bytes == kSmall);
    ScratchPool::give(big, big_bytes);
    ScratchPool::give(small, small_bytes);
    const auto [a, a_bytes] = ScratchPool::take(kSmall); // the small block, not the big one
    CHECK(a == small);
    CHECK(a_bytes == kSmall);
    const auto [b, b_bytes] = ScratchPool::take(kBig - 1000); // the big block, its full size
    CHECK(b == big);
    CHECK(b_bytes == kBig);
    ScratchPool::give(a, a_bytes);
    ScratchPool::give(b, b_bytes);
    const auto [c, c_bytes] = ScratchPool::take(kBig); // still whole after a smaller use
    CHECK(c == big);
    CHECK(c_bytes == kBig);
    ScratchPool::give(c, c_bytes);
}

TEST_CASE("ScratchPool: a full pool keeps its largest blocks", "[workspace]") {
    // a size no other block of this thread's pool reaches (never touched: no page is mapped)
    constexpr std::size_t kTiny = 211, kHuge = std::size_t{64} << 20;
    std::vector<std::pair<void*, std::size_t>> tiny;
    for (std::size_t i = 0; i < ScratchPool::kKeep; ++i)
        tiny.push_back(ScratchPool::take(kTiny + i));
    const auto [huge, huge_bytes] = ScratchPool::take(kHuge);
    for (const auto& [p, n] : tiny)
        ScratchPool::give(p, n); // the pool is full now
    ScratchPool::give(huge, huge_bytes);
    CHECK(ScratchPool::kept_bytes() >= kHuge); // kept; a smaller block was freed
    const auto [again, again_bytes] = ScratchPool::take(kHuge);
    CHECK(again == huge);
    CHECK(again_bytes == kHuge);
    ScratchPool::give(again, again_bytes);
}
