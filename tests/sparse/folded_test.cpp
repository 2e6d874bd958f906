// Tests of the folded key blocks of the fused sparse backward
// (sparse/src/kernels/tile/folded_keys.hpp, folded_pass.hpp): a block of at most 4 heavy keys
// (global keys) whose pairs pass 0 computes with the rows' D. Against the double reference over
// windows, BigBird and random keys with global ones, causal ones, n_q != n_k and grouped heads; the
// counted I/O against the closed form and the dry run, and below the narrow path's (the same
// problem with K given as sparse input, every entry stored: no fold) exactly where a short heavy
// block exists; a non-finite Q row that only one folded key sees; bitwise the same gradients on 1
// and 2 threads.

#include "kernel_case.hpp"

#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using ioattn::DryRunCounter;
using ioattn::IoCounter;
using ioattn::IoReport;
using ioattn::Kernels;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::sparse::SparseInputs;
using ioattn::sparse::Support;
using ioattn::sparse::test::Case;

namespace {

namespace sp = ioattn::sparse;

const std::vector<std::string> kFolding = {"global:1+window:3",
                                           "global:2+window:6",
                                           "bigbird:6:2:2",
                                           "global:3+random:0.05",
                                           "global:2+window:4&causal"};

/// Counted I/O of backward_fused on c at M = the tiling's resident words, with K given dense
/// or (narrow = true) as sparse input holding every entry.
template <typename T>
IoReport counted(Case<T>& c, const Support& s, const Tiling& t, bool narrow) {
    const MemoryModel m{t.resident_words(c.p, Pass::backward, Kernels::sparse)};
    const sp::SparseRows<T> k = sp::test::all_stored(c.k, c.p.d);
    auto a = c.backward();
    SparseInputs<T> in;
    if (narrow) {
        in.k = &k;
        a.k.data = nullptr;
    }
    IoCounter io(m.fast_words);
    sp::backward_fused(a, s, in, t, m, io);
    CHECK(io.report() == sp::io_cost_backward_fused(c.p, s, in, t));
    return io.report();
}

} // namespace

TEMPLATE_TEST_CASE("sparse backward_fused: folded key blocks agree with the reference",
                   "[sparse][backward][folded]",
                   float,
                   double) {
    const std::vector<Tiling> tilings = {
        {Schedule::fused, 64, 128}, {Schedule::fused, 64, 40}, {Schedule::fused, 16, 33}};
    for (const auto& [n_q, n_k] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{200, 230}, {230, 200}, {77, 77}}) {
        const Problem p = sp::test::backward_shape(n_q, n_k, 7); // 4 heads over 2 kv heads
        for (const Tiling& t : tilings)
            for (const std::string& spec : kFolding) {
                CAPTURE(spec, n_q, n_k, t.rows, t.cols);
                const Support s = sp::parse_pattern(spec, n_q, n_k, 3);
                sp::test::check_backward_agrees<TestType>(
                    p, s, 5, [&](Case<TestType>& c, const Support& sup) {
                        NullCounter io;
                        sp::backward_fused(c.backward(), sup, t, MemoryModel{1 << 22}, io);
                    });
            }
    }
}

TEST_CASE("sparse backward_fused: folds move fewer words, exactly where a short heavy block is",
          "[sparse][backward][folded][io]") {
    const Problem p = sp::test::kernel_shape(2, 200, 230, 7);
    for (const Tiling& t : {Tiling{Schedule::fused, 64, 40}, Tiling{Schedule::fused, 16, 33}}) {
        for (const std::string& spec : kFolding) {
            CAPTURE(spec, t.rows, t.cols);
            const Support s = sp::parse_pattern(spec, 200, 230, 3);
            Case<float> c(p, 2);
            sp::test::run_forward_reference(c, s);
            const IoReport folded = counted(c, s, t, false);
            CHECK(folded.total() < counted(c, s, t, true).total());
            CHECK(folded.peak == t.resident_words(p, Pass::backward, Kernels::sparse));
            const MemoryModel m{folded.peak};
            CHECK(sp::dry_run_backward(p, s, t, m) == folded);
        }
        // no heavy keys (a window, a causal square, random keys): nothing folds, the counts
        // are the narrow path's
        for (const std::string spec : {"window:6", "causal", "random:0.1"}) {
            CAPTURE(spec, t.rows, t.cols);
            const Support s = sp::parse_pattern(spec, 200, 230, 3);
            Case<float> c(p, 2);
            sp::test::run_forward_reference(c, s);
            CHECK(counted(c, s, t, false) == counted(c, s, t, true));
        }
    }
    // nor the dense pattern's last block of 2 keys (194 = 3 * 64 + 2): it keeps the dense
    // kernel's I/O
    const Problem q = sp::test::kernel_shape(1, 50, 194, 7);
    const Support dense = sp::parse_pattern("dense", 50, 194, 3);
    Case<float> c(q, 2);
    sp::test::run_forward_reference(c, dense);
    const Tiling t{Schedule::fused, 64, 40};
    CHECK(counted(c, dense, t, false) == counted(c, dense, t, true));
}

TEMPLATE_TEST_CASE("sparse backward_fused: a folded block keeps a non-finite Q row from the key "
                   "that does not see it",
                   "[sparse][backward][folded]",
                   float,
                   double) {
    const Tiling t{Schedule::fused, 64, 64};
    sp::test::check_global_key_hides_nonfinite_query<TestType>(
        [&](Case<TestType>& c, const Support& s) {
            Case<TestType> narrow = c;
            CHECK(counted(c, s, t, false).total() < counted(narrow, s, t, true).total()); // folds
            NullCounter io;
            sp::backward_fused(c.backward(), s, t, MemoryModel{1 << 22}, io);
        });
}

TEST_CASE("sparse backward_fused: folded blocks are bitwise independent of the thread count",
          "[sparse][backward][folded][determinism]") {
    const Problem p = sp::test::kernel_shape(2, 300, 300, 9);
    const Support s = sp::parse_pattern("bigbird:8:2:3", 300, 300, 4);
    Case<float> one(p, 7), two(p, 7);
    for (auto [c, threads] : {std::pair{&one, 1}, std::pair{&two, 2}}) {
        sp::test::run_forward_reference(*c, s);
        tbb::global_control gc(tbb::global_control::max_allowed_parallelism,
                               static_cast<std::size_t>(threads));
        NullCounter io;
        sp::backward_fused(
            c->backward(), s, Tiling{Schedule::fused, 32, 40}, MemoryModel{1 << 22}, io);
    }
    CHECK(one.d_q == two.d_q);
    CHECK(one.d_k == two.d_k);
    CHECK(one.d_v == two.d_v);
}
