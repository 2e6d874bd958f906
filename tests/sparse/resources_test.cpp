// Memory refusals of ioattn::sparse: every sparse kernel refuses a workspace above
// IOATTN_MAX_BYTES before writing anything; the pattern builders, the spec parser, the Matrix
// Market reader, Support::none, transposed() and block_view() refuse supports that cannot fit,
// naming themselves, instead of std::bad_alloc or the OOM killer.

#include "brute_force.hpp"
#include "kernel_case.hpp"
#include "scoped_env.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/matrix_market.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

namespace sp = ioattn::sparse;
using ioattn::ResourceError;
using ioattn::test::ScopedEnv;

namespace {

template <typename Fn>
std::string resource_error_of(Fn&& fn) {
    try {
        fn();
    } catch (const ResourceError& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("every sparse kernel refuses a workspace above IOATTN_MAX_BYTES", "[resources]") {
    using namespace ioattn;
    const Problem p = sp::test::backward_shape(40, 36, 8);
    const sp::Support s = sp::parse_pattern("window:5+random:0.2", p.n_q, p.n_k, 3);
    sp::test::Case<float> c(p, 5);
    const MemoryModel m{4096};
    const Tiling fused =
        Tiling::for_memory(Schedule::fused, m, p, Pass::forward, ioattn::Kernels::sparse);
    const Tiling mat =
        Tiling::for_memory(Schedule::materialized, m, p, Pass::forward, ioattn::Kernels::sparse);
    const Tiling fused_b =
        Tiling::for_memory(Schedule::fused, m, p, Pass::backward, ioattn::Kernels::sparse);
    const Tiling mat_b =
        Tiling::for_memory(Schedule::materialized, m, p, Pass::backward, ioattn::Kernels::sparse);
    NullCounter n;

    struct Kernel {
        std::string name;
        bool forward;
        std::function<void()> run;
    };

    const std::vector<Kernel> kernels{
        {"forward_fused", true, [&] { sp::forward_fused(c.forward(), s, fused, m, n); }},
        {"forward_materialized",
         true,
         [&] { sp::forward_materialized(c.forward(), s, mat, m, n); }},
        {"forward_reference", true, [&] { sp::forward_reference(c.forward(), s); }},
        {"backward_fused", false, [&] { sp::backward_fused(c.backward(), s, fused_b, m, n); }},
        {"backward_materialized",
         false,
         [&] { sp::backward_materialized(c.backward(), s, mat_b, m, n); }},
        {"backward_reference", false, [&] { sp::backward_reference(c.backward(), s); }}};
    for (const Kernel& k : kernels) {
        CAPTURE(k.name);
        std::fill(c.o.begin(), c.o.end(), -7.0F);
        std::fill(c.d_q.begin(), c.d_q.end(), -7.0F);
        {
            const ScopedEnv env("IOATTN_MAX_BYTES", "64");
            const std::string what = resource_error_of(k.run);
            CHECK(contains(what, "ioattn::sparse::"));
            CHECK(contains(what, "available (IOATTN_MAX_BYTES)"));
            CHECK(what.find('\n') == std::string::npos);
            CHECK((k.forward ? c.o[0] : c.d_q[0]) == -7.0F);
        }
        const ScopedEnv env("IOATTN_MAX_BYTES", "64M");
        CHECK_NOTHROW(k.run());
    }
}

TEST_CASE("supports that cannot fit are refused as they are built", "[resources]") {
    const ScopedEnv env("IOATTN_MAX_BYTES", "1M");
    const std::vector<std::pair<std::string, std::function<sp::Support()>>> builders{
        {"pattern_dense", [] { return sp::pattern_dense(2000, 2000); }},
        {"pattern_causal", [] { return sp::pattern_causal(3000, 3000); }},
        {"pattern_window", [] { return sp::pattern_window(100000, 100000, 8); }},
        {"pattern_random", [] { return sp::pattern_random(3000, 3000, 0.5, 1); }},
        {"pattern_bigbird", [] { return sp::pattern_bigbird(20000, 20000, 4, 2, 8, 1); }},
        {"pattern_block", [] { return sp::pattern_block(3000, 3000, 64, 1.0, 1); }},
        {"parse_pattern", [] { return sp::parse_pattern("(dense)", 2000, 2000, 1); }},
        {"Support::none", [] { return sp::Support::none(1 << 20, 4); }},
        {"union_of", [] {
             const ScopedEnv more("IOATTN_MAX_BYTES", "16M");
             const sp::Support a = sp::pattern_window(200000, 200000, 1);
             const sp::Support b = sp::pattern_window(200000, 200000, 2);
             const ScopedEnv less("IOATTN_MAX_BYTES", "1M");
             return sp::union_of(a, b);
         }}};
    for (const auto& [name, build] : builders) {
        CAPTURE(name);
        const std::string what = resource_error_of(build);
        CHECK(contains(what,
                       "ioattn::sparse::" + (name == "parse_pattern" ? "pattern_dense" : name)));
        CHECK(contains(what, "1048576 bytes (1.00 MiB) available (IOATTN_MAX_BYTES)"));
    }
    CHECK_NOTHROW(sp::pattern_window(1000, 1000, 8)); // 136 KiB fits
}

TEST_CASE("a Matrix Market header larger than memory is refused before reading", "[resources]") {
    const ScopedEnv env("IOATTN_MAX_BYTES", "1M");
    const sp::test::TempFile f("huge.mtx",
                               "%%MatrixMarket matrix coordinate pattern general\n"
                               "1000000000 1000000000 2\n1 1\n5 7\n");
    const std::string what = resource_error_of([&] { (void)sp::read_matrix_market(f.path()); });
    // 8 (rows + 1) row offsets, CHOLMOD's 8 (rows + cols) workspace, 64 bytes per entry
    CHECK(contains(what, "ioattn::sparse::read_matrix_market: needs 24000000136 bytes"));
    CHECK(contains(what, "1000000000 x 1000000000 file"));
}

TEST_CASE("a transpose or tile view beyond any machine is refused", "[resources]") {
    // two pairs, but 2^50 keys: both need O(n_k) scratch
    const ScopedEnv env("IOATTN_MAX_BYTES", std::nullopt);
    const sp::Support wide(2, std::int64_t{1} << 50, {0, 1, 2}, {5, 1LL << 49});
    CHECK(contains(resource_error_of([&] { (void)wide.transposed(); }),
                   "ioattn::sparse::Support::transposed: needs"));
    CHECK(contains(resource_error_of([&] { (void)wide.block_view(1, 1); }),
                   "ioattn::sparse::Support::block_view: needs"));
}
