// Tests of ioattn/resources.hpp and the memory checks of kernels::Workspace: IOATTN_MAX_BYTES
// and environment_count parsing, saturating sizes, CallMemory refusing a call before anything is allocated, and every
// dense kernel refusing a workspace above a small limit with one ResourceError line.

#include "scoped_env.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/resources.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using ioattn::CallMemory;
using ioattn::ResourceError;
using ioattn::kernels::Workspace;
using ioattn::test::ScopedEnv;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

/// Whether `text` names one of the machine's or the process's limits (memory_limits.hpp).
bool machine_source(const std::string& text) {
    return contains(text, "physical memory") || contains(text, "cgroup memory limit") ||
           contains(text, "RLIMIT_AS") || contains(text, "RLIMIT_DATA");
}

/// The message of the ResourceError fn() throws ("" if it throws none).
template <typename Fn>
std::string resource_error_of(Fn&& fn) {
    try {
        fn();
    } catch (const ResourceError& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("memory_limit reads IOATTN_MAX_BYTES with binary suffixes", "[resources]") {
    const std::vector<std::pair<std::string, std::uint64_t>> ok{{"0", 0},
                                                                {"1000", 1000},
                                                                {"4k", 4096},
                                                                {"4K", 4096},
                                                                {"3M", 3ULL << 20},
                                                                {"2MiB", 2ULL << 20},
                                                                {"5GB", 5ULL << 30},
                                                                {"1T", 1ULL << 40},
                                                                {"77B", 77},
                                                                {"18446744073709551615", kMax}};
    for (const auto& [text, bytes] : ok) {
        CAPTURE(text);
        const ScopedEnv env("IOATTN_MAX_BYTES", text);
        const ioattn::MemoryLimit m = ioattn::memory_limit();
        CHECK(m.bytes == bytes);
        CHECK(m.source == "IOATTN_MAX_BYTES");
    }
    for (const std::string bad :
         {"abc", "12x", "-5", "1e9", "1.5G", "4 k", "99999999999999999T", "18446744073709551616"}) {
        CAPTURE(bad);
        const ScopedEnv env("IOATTN_MAX_BYTES", bad);
        CHECK_THROWS_AS(ioattn::memory_limit(), ioattn::InvalidArgument);
        CHECK_THROWS_WITH(ioattn::memory_limit(), Catch::Contains("IOATTN_MAX_BYTES"));
    }
}

TEST_CASE("environment_count reads a decimal count, in units when asked", "[resources]") {
    constexpr const char* kName = "IOATTN_TEST_COUNT";
    {
        const ScopedEnv env(kName, std::nullopt);
        CHECK_FALSE(ioattn::environment_count(kName, "t", "a count").has_value());
    }
    {
        const ScopedEnv env(kName, std::string());
        CHECK_FALSE(ioattn::environment_count(kName, "t", "a count").has_value());
    }
    const std::vector<std::pair<std::string, std::uint64_t>> ok{{"0", 0}, {"12", 12}};
    for (const auto& [text, n] : ok) {
        const ScopedEnv env(kName, text);
        CHECK(ioattn::environment_count(kName, "t", "a count") == n);
        CHECK(ioattn::environment_count(kName, "t", "MiB", 1ULL << 20) == n << 20);
    }
    for (const std::string bad : {"x", "-1", "3M", " 4", "1.5"}) {
        CAPTURE(bad);
        const ScopedEnv env(kName, bad);
        CHECK_THROWS_WITH(ioattn::environment_count(kName, "where", "a count >= 0"),
                          "where: IOATTN_TEST_COUNT = '" + bad + "' (expected a count >= 0)");
    }
    const ScopedEnv env(kName, "17592186044416"); // 2^44 MiB: 2^64 bytes
    CHECK(ioattn::environment_count(kName, "t", "a count") == 17592186044416ULL);
    CHECK_THROWS_AS(ioattn::environment_count(kName, "t", "MiB", 1ULL << 20),
                    ioattn::InvalidArgument);
}

TEST_CASE("without IOATTN_MAX_BYTES the limit is the machine's memory", "[resources]") {
    for (const auto& unset : {std::optional<std::string>{}, std::optional<std::string>{""}}) {
        const ScopedEnv env("IOATTN_MAX_BYTES", unset);
        const ioattn::MemoryLimit m = ioattn::memory_limit();
        CHECK(machine_source(m.source));
        CHECK(m.bytes >= (64ULL << 20)); // any machine that runs the tests has 64 MiB
        CHECK(m.bytes < kMax);
    }
}

TEST_CASE("byte counts saturate instead of wrapping", "[resources]") {
    CHECK(ioattn::bytes_of(10, 8) == 80);
    CHECK(ioattn::bytes_of(0, 8) == 0);
    CHECK(ioattn::bytes_of(-1, 8) == kMax);
    CHECK(ioattn::bytes_of(std::numeric_limits<std::int64_t>::max(), 4) == kMax);
    CHECK(ioattn::add_bytes(kMax - 1, 1) == kMax);
    CHECK(ioattn::add_bytes(kMax, 5) == kMax);
    CHECK(ioattn::add_bytes(2, 3) == 5);
    CHECK(Workspace<float>::bytes(2, 10) == 2 * 16 * 4); // slabs padded to 16 elements
    CHECK(Workspace<double>::bytes(0, 10) == 0);
    CHECK(Workspace<double>::bytes(3, -1) == kMax);
    CHECK(Workspace<double>::bytes(4, std::numeric_limits<std::int64_t>::max()) == kMax);
    CHECK(ioattn::format_bytes(512) == "512 B");
    CHECK(ioattn::format_bytes(3ULL << 30) == "3.00 GiB");
}

TEST_CASE("require_memory names the call, the bytes needed and available", "[resources]") {
    const ScopedEnv env("IOATTN_MAX_BYTES", "1000");
    CHECK_NOTHROW(ioattn::require_memory("f", 1000, "things"));
    const std::string what =
        resource_error_of([] { ioattn::require_memory("ioattn::f", 1001, "things"); });
    CHECK(contains(what, "ioattn::f: needs 1001 bytes"));
    CHECK(contains(what, "of things"));
    CHECK(contains(what, "1000 bytes"));
    CHECK(contains(what, "IOATTN_MAX_BYTES"));
    CHECK(what.find('\n') == std::string::npos);
    const std::string failed =
        resource_error_of([] { ioattn::throw_allocation_failed("ioattn::g", 5, "x"); });
    CHECK(contains(failed, "ioattn::g: allocating 5 bytes"));
    CHECK(contains(failed, "failed"));
}

TEST_CASE("a workspace outside a CallMemory checks its own size", "[resources]") {
    const ScopedEnv env("IOATTN_MAX_BYTES", "4096");
    CHECK_NOTHROW(Workspace<float>(1, 1024)); // exactly the limit
    const std::string what = resource_error_of([] { Workspace<float>(1, 1025); });
    CHECK(contains(what, "needs 4160 bytes")); // 1040 floats after padding
    const Workspace<std::int64_t> ws(2, 3);
    CHECK(ws.slab(0)[0] == 0); // zero-filled
    CHECK(ws.slab(1) - ws.slab(0) == 16);
}

TEST_CASE("CallMemory checks the total of its workspaces before allocating any", "[resources]") {
    const ScopedEnv env("IOATTN_MAX_BYTES", "6000");
    SECTION("each fits alone, together they do not") {
        const std::string what = resource_error_of([] {
            CallMemory call("ioattn::test_call");
            const Workspace<double> a(1, 400); // 3200 bytes
            const Workspace<double> b(1, 400);
            CHECK(call.bytes() == 6400);
            call.allocate();
        });
        CHECK(contains(what, "ioattn::test_call: needs 6400 bytes"));
        CHECK(contains(what, "6000 bytes"));
    }
    SECTION("a total that fits is allocated and zero-filled, also from the pool") {
        {
            CallMemory call("ioattn::test_call");
            const Workspace<double> a(2, 100);
            CHECK(call.bytes() == 2 * 112 * 8);
            call.allocate();
            REQUIRE(a.slab(0) != nullptr);
            CHECK(a.slab(1)[111] == 0.0);
            a.slab(1)[111] = 3.0; // dirty the block the pool keeps
        }
        CallMemory call("ioattn::test_call");
        const Workspace<double> b(2, 100);
        call.allocate();
        CHECK(b.slab(1)[111] == 0.0);
    }
    SECTION("a workspace destroyed before allocate() leaves the call") {
        CallMemory call("ioattn::test_call");
        { const Workspace<double> gone(1, 700); }
        const Workspace<double> kept(1, 10);
        CHECK(call.bytes() == 16 * 8);
        CHECK_NOTHROW(call.allocate());
        CHECK(kept.slab(0)[0] == 0.0);
    }
    SECTION("nested calls size their own workspaces") {
        CallMemory outer("ioattn::outer");
        const Workspace<double> a(1, 100);
        {
            CallMemory inner("ioattn::inner");
            const Workspace<double> b(1, 700); // 5632 bytes
            CHECK(inner.bytes() == 5632);
            inner.allocate();
        }
        CHECK(outer.bytes() == 112 * 8);
        outer.allocate();
    }
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Sanitizer allocators abort on an impossible request instead of throwing std::bad_alloc.
TEST_CASE("a failed allocation becomes ResourceError", "[resources]") {
    const ScopedEnv env("IOATTN_MAX_BYTES", std::to_string(kMax));
    const std::string what = resource_error_of([] { Workspace<double>(1, 1LL << 60); });
    CHECK(contains(what, "ioattn::kernels::Workspace: allocating"));
    CHECK(contains(what, "failed"));
}
#endif

TEST_CASE("a request beyond any machine is refused without a limit set", "[resources]") {
    const ScopedEnv env("IOATTN_MAX_BYTES", std::nullopt);
    const std::string what = resource_error_of([] { Workspace<double>(1, 1LL << 60); });
    CHECK(contains(what, "needs 9223372036854775808 bytes"));
    CHECK(machine_source(what));
}

TEST_CASE("every dense kernel refuses a workspace above IOATTN_MAX_BYTES", "[resources]") {
    using namespace ioattn;
    Problem p;
    p.heads = 2;
    p.n_q = 96;
    p.n_k = 80;
    p.d = 16;
    p = p.resolved();
    const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
    std::vector<float> q(n(2 * 96 * 16), 0.5F), k(n(2 * 80 * 16), 0.25F), v(k.size(), 1.0F);
    std::vector<float> o(q.size(), -7.0F), lse(n(2 * 96), -7.0F), d_o(q.size(), 1.0F);
    std::vector<float> d_q(q.size(), -7.0F), d_k(k.size(), -7.0F), d_v(k.size(), -7.0F);
    BackwardArgs<float> a;
    a.problem = p;
    a.q = TensorView<const float>::packed(q.data(), 1, 2, 96, 16);
    a.k = TensorView<const float>::packed(k.data(), 1, 2, 80, 16);
    a.v = TensorView<const float>::packed(v.data(), 1, 2, 80, 16);
    a.o = TensorView<float>::packed(o.data(), 1, 2, 96, 16);
    a.lse = TensorView<float>::packed(lse.data(), 1, 2, 96, 1);
    a.d_o = TensorView<const float>::packed(d_o.data(), 1, 2, 96, 16);
    a.d_q = TensorView<float>::packed(d_q.data(), 1, 2, 96, 16);
    a.d_k = TensorView<float>::packed(d_k.data(), 1, 2, 80, 16);
    a.d_v = TensorView<float>::packed(d_v.data(), 1, 2, 80, 16);
    const MemoryModel m{4096};
    const Tiling fused = Tiling::for_memory(Schedule::fused, m, p);
    const Tiling mat = Tiling::for_memory(Schedule::materialized, m, p);
    const Tiling fused_b = Tiling::for_memory(Schedule::fused, m, p, Pass::backward);
    const Tiling mat_b = Tiling::for_memory(Schedule::materialized, m, p, Pass::backward);
    NullCounter c;

    struct Kernel {
        std::string name;
        std::function<void()> run;
    };

    const std::vector<Kernel> kernels{
        {"forward_fused", [&] { dense::forward_fused(a, fused, m, c); }},
        {"forward_materialized", [&] { dense::forward_materialized(a, mat, m, c); }},
        {"forward_reference", [&] { dense::forward_reference<float>(a); }},
        {"backward_fused", [&] { dense::backward_fused(a, fused_b, m, c); }},
        {"backward_materialized", [&] { dense::backward_materialized(a, mat_b, m, c); }},
        {"backward_reference", [&] { dense::backward_reference<float>(a); }},
        {"forward", [&] { dense::forward(a, fused, m, c); }},
        {"backward", [&] { dense::backward(a, mat_b, m, c); }}};
    for (const Kernel& kernel : kernels) {
        CAPTURE(kernel.name);
        std::fill(o.begin(), o.end(), -7.0F);
        std::fill(d_q.begin(), d_q.end(), -7.0F);
        {
            const ScopedEnv env("IOATTN_MAX_BYTES", "100");
            const std::string what = resource_error_of(kernel.run);
            CHECK(contains(what, "ioattn::dense::"));
            CHECK(contains(what, "of workspace"));
            CHECK(contains(what, "100 bytes (100 B) available (IOATTN_MAX_BYTES)"));
            CHECK(what.find('\n') == std::string::npos);
            if (kernel.name.find("forward") == 0)
                CHECK(o[0] == -7.0F); // refused before it wrote anything
            else
                CHECK(d_q[0] == -7.0F);
        }
        const ScopedEnv env("IOATTN_MAX_BYTES", "64M");
        CHECK_NOTHROW(kernel.run());
    }
    // the materializing backward holds P (n_q x n_k per head of a group): the refusal says so
    const ScopedEnv env("IOATTN_MAX_BYTES", "20000");
    const std::string what =
        resource_error_of([&] { dense::backward_materialized(a, mat_b, m, c); });
    const std::uint64_t scores = 96 * 80 * 4;
    CHECK(contains(what, "ioattn::dense::backward_materialized: needs "));
    const auto needed = std::stoull(what.substr(what.find("needs ") + 6));
    CHECK(needed >= scores);
}
