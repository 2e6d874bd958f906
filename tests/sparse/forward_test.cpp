// Tests of the sparse forward kernels (forward_reference, forward_fused, forward_materialized):
// agreement with the reference on every pattern family and edge shapes (error rule in float,
// tight in double), exact I/O (counted == cost == dry run; dense and causal patterns reduce to
// the dense closed forms; closed forms for banded and block-diagonal patterns), empty rows,
// sparse inputs, determinism across thread counts, O alike on and off a 64-byte boundary
// (streamed stores), and the documented throws.

#include "brute_force.hpp"
#include "kernel_case.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::sparse::Support;
using ioattn::sparse::test::Case;

namespace {

const std::vector<std::string> kPatterns = {"dense",
                                            "causal",
                                            "window:3",
                                            "causal-window:4",
                                            "dilated:2:2",
                                            "global:2+window:2",
                                            "bigbird:2:1:2",
                                            "strided:4",
                                            "block:4:0.4",
                                            "random:0.2",
                                            "window:3&causal"};

Problem shape(std::int64_t n_q, std::int64_t n_k, std::int64_t d) {
    return ioattn::sparse::test::kernel_shape(2, n_q, n_k, d);
}

/// The kernel's O and L on (p, s) against the double reference (error rule in float).
template <typename T, typename Kernel>
void check_case(const Problem& p, const Support& s, Kernel kernel) {
    Case<T> ref(p, 3);
    const Case<double> oracle = ioattn::sparse::test::reference_of(p, ref, s);
    Case<T> c(p, 3);
    kernel(c, s);
    const double err = ioattn::sparse::test::max_error(c.o, oracle.o);
    const double naive =
        ioattn::sparse::test::max_error(ioattn::sparse::test::naive_output(ref, s), oracle.o);
    const double tiny = 8 * static_cast<double>(std::numeric_limits<T>::epsilon());
    CHECK(err <= 2 * naive + tiny);
    ioattn::sparse::test::check_lse(c.lse, oracle.lse);
}

template <typename T, typename Kernel>
void check_against_reference(Kernel kernel) {
    for (const auto& [n_q, n_k] :
         std::vector<std::pair<int, int>>{{13, 13}, {9, 17}, {17, 9}, {1, 5}})
        for (const std::int64_t d : {1, 7})
            for (const std::string& spec : kPatterns) {
                CAPTURE(spec, n_q, n_k, d);
                check_case<T>(
                    shape(n_q, n_k, d), ioattn::sparse::parse_pattern(spec, n_q, n_k, 11), kernel);
            }
}

} // namespace

TEMPLATE_TEST_CASE("sparse forward_fused agrees with the reference on every pattern family",
                   "[sparse][forward]",
                   float,
                   double) {
    check_against_reference<TestType>([](Case<TestType>& c, const Support& s) {
        NullCounter io;
        ioattn::sparse::forward_fused(
            c.forward(), s, Tiling{Schedule::fused, 4, 3}, MemoryModel{1 << 20}, io);
    });
}

TEMPLATE_TEST_CASE("sparse forward_fused: rows as a run of keys with extra keys around it",
                   "[sparse][forward]",
                   float,
                   double) {
    // Runs long enough to be read in place, extra keys before and after them (one beside each
    // end), rows whose two longest runs tie, empty and full rows; chunk widths that cut runs.
    const Support s = ioattn::sparse::test::runs_with_extras(48, 96);
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {16, 16}, {8, 24}, {32, 7}, {5, 40}, {1, 64}, {3, 64}}) {
        CAPTURE(rows, cols);
        check_case<TestType>(shape(48, 96, 5), s, [&](Case<TestType>& c, const Support& support) {
            NullCounter io;
            ioattn::sparse::forward_fused(c.forward(),
                                          support,
                                          Tiling{Schedule::fused, rows, cols},
                                          MemoryModel{1 << 22},
                                          io);
        });
    }
}

TEMPLATE_TEST_CASE("sparse forward_materialized agrees with the reference on every pattern family",
                   "[sparse][forward]",
                   float,
                   double) {
    check_against_reference<TestType>([](Case<TestType>& c, const Support& s) {
        NullCounter io;
        ioattn::sparse::forward_materialized(
            c.forward(), s, Tiling{Schedule::materialized, 3, 3}, MemoryModel{1 << 20}, io);
    });
}

TEMPLATE_TEST_CASE("sparse forward_materialized: rows with keys in few of many tiles",
                   "[sparse][forward]",
                   float,
                   double) {
    // N = 1024 in tiles of 32: bigbird's and random's row blocks hold a few runs per tile (2 or
    // 4 random keys per row over 32 tiles), so their rows wait in per-tile lists
    // (tile_rows.hpp: bucketed when the runs are fewer than half of r per tile); strided:32
    // puts a key of every row in every tile (scanned); runs_with_extras mixes interval rows
    // and rows with keys around a run.
    for (const char* spec : {"bigbird:4:1:2", "random:0.004", "strided:32"}) {
        CAPTURE(spec);
        check_case<TestType>(shape(1024, 1024, 7),
                             ioattn::sparse::parse_pattern(spec, 1024, 1024, 5),
                             [](Case<TestType>& c, const Support& s) {
                                 NullCounter io;
                                 ioattn::sparse::forward_materialized(
                                     c.forward(),
                                     s,
                                     Tiling{Schedule::materialized, 32, 32},
                                     MemoryModel{1 << 20},
                                     io);
                             });
    }
    for (const std::int64_t b : {4, 16, 48}) {
        CAPTURE(b);
        check_case<TestType>(
            shape(48, 96, 5),
            ioattn::sparse::test::runs_with_extras(48, 96),
            [&](Case<TestType>& c, const Support& s) {
                NullCounter io;
                ioattn::sparse::forward_materialized(
                    c.forward(), s, Tiling{Schedule::materialized, b, b}, MemoryModel{1 << 20}, io);
            });
    }
}

TEST_CASE("sparse reference equals the dense reference on the dense and causal patterns",
          "[sparse][forward]") {
    for (const bool causal : {false, true}) {
        Problem p = shape(11, 15, 6);
        Case<double> a(p, 5), b(p, 5);
        const Support s = ioattn::sparse::parse_pattern(causal ? "causal" : "dense", 11, 15, 1);
        ioattn::sparse::forward_reference(a.forward(), s);
        b.p.causal = causal;
        auto args = b.forward();
        args.problem.causal = causal;
        ioattn::dense::forward_reference(args);
        CHECK(ioattn::sparse::test::max_error(a.o, b.o) < 1e-14);
        CHECK(ioattn::sparse::test::max_error(a.lse, b.lse) < 1e-14);
    }
}

TEST_CASE("sparse counted I/O equals the structural cost and the dry run", "[sparse][io]") {
    for (const std::string& spec : kPatterns)
        for (const auto& t : {Tiling{Schedule::fused, 4, 3},
                              Tiling{Schedule::fused, 7, 16},
                              Tiling{Schedule::materialized, 3, 3},
                              Tiling{Schedule::materialized, 5, 5}}) {
            const Problem p = shape(17, 13, 6);
            const Support s = ioattn::sparse::parse_pattern(spec, 17, 13, 2);
            CAPTURE(spec, t.rows, t.cols, ioattn::to_string(t.schedule));
            Case<float> c(p, 1);
            const MemoryModel m{
                t.resident_words(p, ioattn::Pass::forward, ioattn::Kernels::sparse)};
            IoCounter io(m.fast_words);
            ioattn::sparse::forward(c.forward(), s, t, m, io);
            const auto cost = ioattn::sparse::io_cost_forward(p, s, t);
            CHECK(io.report() == cost);
            CHECK(ioattn::sparse::dry_run_forward(p, s, t, m) == cost);
            CHECK(io.report().peak <= m.fast_words);
        }
}

TEST_CASE("sparse counts reduce to the dense closed forms on dense and causal patterns",
          "[sparse][io]") {
    for (const bool causal : {false, true})
        for (const auto& t : {Tiling{Schedule::fused, 4, 3},
                              Tiling{Schedule::fused, 16, 64},
                              Tiling{Schedule::materialized, 4, 4}}) {
            Problem p = shape(37, 29, 8);
            const Support s = ioattn::sparse::parse_pattern(causal ? "causal" : "dense", 37, 29, 1);
            Problem dense = p;
            dense.causal = causal;
            CAPTURE(causal, t.rows, t.cols);
            const auto sparse_cost = ioattn::sparse::io_cost_forward(p, s, t);
            const auto dense_cost = ioattn::io_cost_forward(dense, t);
            if (!causal && t.schedule == Schedule::materialized) {
                // the same words and peak, plus the keys each pass over a tile's stored scores
                // reads (the keep step and each d_v chunk; full tiles take no per-pair SDDMM),
                // an int64 being two float words
                const Problem q = p.resolved("test");
                const std::int64_t vch = (q.d_v + t.rows - 1) / t.rows;
                CHECK(sparse_cost.reads ==
                      dense_cost.reads + 2 * (1 + vch) * s.z_qk() * q.batch_heads());
                CHECK(sparse_cost.writes == dense_cost.writes);
                CHECK(sparse_cost.peak == dense_cost.peak);
            } else if (t.schedule == Schedule::fused) {
                // the full and causal masks move the same words (their blocks are intervals:
                // no index words); the sparse kernel's footprint is the dense one plus its
                // gathered chunks and the indices it walks (Kernels::sparse)
                CHECK(sparse_cost.reads == dense_cost.reads);
                CHECK(sparse_cost.writes == dense_cost.writes);
                CHECK(sparse_cost.peak ==
                      t.resident_words(p, ioattn::Pass::forward, ioattn::Kernels::sparse));
                CHECK(sparse_cost.peak > dense_cost.peak);
            } else { // materialized: the diagonal tiles store only their allowed scores
                CHECK(sparse_cost.writes < dense_cost.writes);
            }
        }
}

TEST_CASE("closed forms: banded and block-diagonal patterns", "[sparse][io]") {
    Problem p = shape(64, 64, 8);
    p.batch = 1;
    p.heads = p.kv_heads = 1;
    const std::int64_t w = 5, br = 8;
    const Support band = ioattn::sparse::parse_pattern("window:5", 64, 64, 1);
    const Tiling t{Schedule::fused, br, 4};
    std::int64_t reads = p.n_q * p.d;
    for (std::int64_t i0 = 0; i0 < 64; i0 += br) // block sees keys [i0 - w, i0 + br - 1 + w]
        reads += (std::min<std::int64_t>(64, i0 + br + w) - std::max<std::int64_t>(0, i0 - w)) *
                 (p.d + p.d_v);
    CHECK(ioattn::sparse::io_cost_forward_fused(p, band, t).reads == reads);
    const Support diag = ioattn::sparse::test::from_predicate(
        64, 64, [](std::int64_t i, std::int64_t j) { return i / 8 == j / 8; });
    CHECK(ioattn::sparse::io_cost_forward_fused(p, diag, t).reads ==
          p.n_q * p.d + p.n_k * (p.d + p.d_v));
    CHECK(ioattn::sparse::io_cost_forward_fused(p, diag, t).writes == p.n_q * (p.d_v + 1));
}

TEST_CASE("rows with no allowed key give O = 0 and L = -inf, one key gives O = v",
          "[sparse][forward]") {
    const Problem p = shape(6, 5, 3);
    const Support none = Support::none(6, 5);
    const Support one = ioattn::sparse::test::from_predicate(
        6, 5, [](std::int64_t i, std::int64_t j) { return i % 2 == 0 && j == 2; });
    for (const auto& t : {Tiling{Schedule::fused, 4, 3}, Tiling{Schedule::materialized, 2, 2}}) {
        Case<float> c(p, 9);
        NullCounter io;
        ioattn::sparse::forward(c.forward(), none, t, MemoryModel{1 << 20}, io);
        for (const float x : c.o)
            CHECK(x == 0.0F);
        for (const float l : c.lse)
            CHECK(l == -std::numeric_limits<float>::infinity());
        ioattn::sparse::forward(c.forward(), one, t, MemoryModel{1 << 20}, io);
        for (std::int64_t sl = 0; sl < p.batch_heads(); ++sl)
            for (std::int64_t i = 0; i < 6; ++i) {
                const std::int64_t b = sl / p.heads, g = sl % p.heads / p.group();
                for (std::int64_t x = 0; x < p.d_v; ++x) {
                    const float got = c.o[static_cast<std::size_t>((sl * 6 + i) * p.d_v + x)];
                    const float want = i % 2 == 0 ? c.v[static_cast<std::size_t>(
                                                        ((b * p.kv_heads + g) * 5 + 2) * p.d_v + x)]
                                                  : 0.0F;
                    CHECK(got == Approx(want).margin(1e-6));
                }
            }
    }
}

TEST_CASE("sparse inputs: fused equals the reference and reads only stored entries",
          "[sparse][inputs]") {
    const Problem p = shape(19, 23, 12);
    const Support s = ioattn::sparse::parse_pattern("window:4+global:1", 19, 23, 1);
    Case<double> c(p, 4);
    for (auto* x : {&c.q, &c.k, &c.v})
        for (double& e : *x)
            e = e < 0.2 ? 0.0 : e; // ReLU-like features
    using Rows = ioattn::sparse::SparseRows<double>;
    const Rows q = Rows::from_dense_threshold(c.q, p.batch_heads() * 19, 12, 0.0);
    const Rows k = Rows::from_dense_threshold(c.k, p.batch * p.kv_heads * 23, 12, 0.0);
    const Rows v = Rows::from_dense_threshold(c.v, p.batch * p.kv_heads * 23, 5, 0.0);
    const ioattn::sparse::SparseInputs<double> in{&q, &k, &v};
    Case<double> ref(p, 4), dense(p, 4);
    dense.q = c.q;
    dense.k = c.k;
    dense.v = c.v;
    ioattn::sparse::forward_reference(ref.forward(), s, in);
    const Tiling t{Schedule::fused, 5, 4};
    IoCounter io(1 << 20), io_dense(1 << 20);
    ioattn::sparse::forward_fused(c.forward(), s, in, t, MemoryModel{1 << 20}, io);
    ioattn::sparse::forward_fused(dense.forward(), s, t, MemoryModel{1 << 20}, io_dense);
    CHECK(ioattn::sparse::test::max_error(c.o, ref.o) < 1e-13);
    CHECK(ioattn::sparse::test::max_error(dense.o, ref.o) < 1e-13);
    CHECK(io.report() == ioattn::sparse::io_cost_forward_fused(p, s, in, t));
    CHECK(io.report().reads < io_dense.report().reads);
    ioattn::sparse::SparseInputs<double> wrong{&k, nullptr, nullptr}; // k's rows as Q: bad shape
    CHECK_THROWS_AS(ioattn::sparse::forward_reference(ref.forward(), s, wrong),
                    ioattn::InvalidArgument);
}

TEST_CASE("sparse forward is bitwise independent of the thread count", "[sparse][determinism]") {
    const Problem p = shape(40, 33, 9);
    const Support bigbird = ioattn::sparse::parse_pattern("bigbird:3:2:3", 40, 33, 6);
    // random:0.2 in 32 x 32 tiles: rows of about 6 keys in tiles under 1/4 full, so the
    // materializing SDDMM takes them four keys at a time (kernels::dot4)
    const Support scattered = ioattn::sparse::parse_pattern("random:0.2", 40, 33, 6);
    for (const auto& [s, t] : {std::pair{&bigbird, Tiling{Schedule::fused, 8, 5}},
                               std::pair{&bigbird, Tiling{Schedule::materialized, 4, 4}},
                               std::pair{&scattered, Tiling{Schedule::materialized, 32, 32}}}) {
        Case<float> one(p, 2), two(p, 2);
        {
            tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 1);
            NullCounter io;
            ioattn::sparse::forward(one.forward(), *s, t, MemoryModel{1 << 20}, io);
        }
        {
            tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 2);
            NullCounter io;
            ioattn::sparse::forward(two.forward(), *s, t, MemoryModel{1 << 20}, io);
        }
        CHECK(one.o == two.o);
        CHECK(one.lse == two.lse);
    }
}

TEST_CASE("sparse forward_fused writes the same O on and off a 64-byte boundary",
          "[sparse][forward]") {
    // The tile path stores O's whole vectors past the caches where a row's vector starts on a
    // vector boundary (kernels::store_row_vector), elsewhere as any store: O on a 64-byte
    // boundary with rows of 48 floats (every row aligned) or 40 (every other one), and one
    // float off it (none aligned), must hold the same bits.
    for (const std::int64_t d_v : {48, 40}) {
        Problem p; // one head
        p.n_q = 100;
        p.n_k = 90;
        p.d = 32;
        p.d_v = d_v;
        p = p.resolved();
        for (const char* spec : {"window:20+global:2", "dense"}) {
            CAPTURE(d_v, spec);
            const Support s = ioattn::sparse::parse_pattern(spec, p.n_q, p.n_k, 5);
            const auto n = static_cast<std::size_t>(p.n_q * p.d_v);
            std::vector<float> buffer(n + 32, 0.0F);
            std::size_t skip = 0; // floats to the first 64-byte boundary
            while (reinterpret_cast<std::uintptr_t>(buffer.data() + skip) % 64 != 0)
                ++skip;
            std::vector<std::vector<float>> outputs;
            for (const std::size_t off : {skip, skip + 1}) {
                Case<float> c(p, 7);
                auto args = c.forward();
                args.o = ioattn::TensorView<float>::packed(buffer.data() + off, 1, 1, p.n_q, d_v);
                NullCounter io;
                ioattn::sparse::forward_fused(
                    args, s, Tiling{Schedule::fused, 64, 32}, MemoryModel{1 << 20}, io);
                outputs.emplace_back(buffer.begin() + static_cast<std::ptrdiff_t>(off),
                                     buffer.begin() + static_cast<std::ptrdiff_t>(off + n));
            }
            CHECK(outputs[0] == outputs[1]);
            Case<float> ref(p, 7);
            const auto oracle = ioattn::sparse::test::reference_of(p, ref, s);
            CHECK(ioattn::sparse::test::max_error(outputs[0], oracle.o) < 1e-5);
        }
    }
}

TEST_CASE("sparse forward throws on a mismatched support, a causal problem, a small M",
          "[sparse][throws]") {
    const Problem p = shape(8, 8, 4);
    Case<float> c(p, 1);
    NullCounter io;
    const Tiling t{Schedule::fused, 4, 4};
    CHECK_THROWS_AS(ioattn::sparse::forward_fused(
                        c.forward(), Support::none(8, 9), t, MemoryModel{1 << 20}, io),
                    ioattn::InvalidArgument);
    auto causal = c.forward();
    causal.problem.causal = true;
    CHECK_THROWS_AS(
        ioattn::sparse::forward_fused(causal, Support::none(8, 8), t, MemoryModel{1 << 20}, io),
        ioattn::InvalidArgument);
    CHECK_THROWS_AS(
        ioattn::sparse::forward_fused(
            c.forward(),
            Support::none(8, 8),
            t,
            MemoryModel{t.resident_words(p, ioattn::Pass::forward, ioattn::Kernels::sparse) - 1},
            io),
        ioattn::CapacityError);
    CHECK_THROWS_AS(ioattn::sparse::forward_materialized(
                        c.forward(), Support::none(8, 8), t, MemoryModel{1 << 20}, io),
                    ioattn::InvalidArgument);
}
