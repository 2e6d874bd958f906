// Tests of what the materializing sparse kernels read (forward_materialized.cpp,
// backward_materialized.cpp): of K and V only the rows of the keys a row block sees (a tile's
// touched keys), of dO and Q in dV and dK only the queries a key tile's pairs name, Q_i (and
// the backward's dO_i) once per row block when d <= w; with feature chunks of their own width
// (Tiling::depth) both passes agree with the reference and count what the closed form and the
// dry run say; Tiling::for_memory takes whole feature rows for the sparse kernels.

#include "kernel_case.hpp"

#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/block_view.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using ioattn::DryRunCounter;
using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Operand;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::sparse::Support;
using ioattn::sparse::test::Case;

namespace {

const std::vector<std::string> kRowsPatterns = {
    "bigbird:2:1:2", "random:0.15", "window:3", "strided:5", "dense", "global:2+window:1"};

/// Sum over row blocks of b rows of the keys each sees (BlockView::keys_of).
std::int64_t seen_keys(const Support& s, std::int64_t b) {
    const auto& view = s.cached_block_view(b, b);
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < view.row_blocks; ++i)
        n += static_cast<std::int64_t>(view.keys_of(i).size());
    return n;
}

/// Sum over query rows of the key tiles of side b each has a pair in.
std::int64_t row_tile_pairs(const Support& s, std::int64_t b) {
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < s.n_q(); ++i) {
        std::int64_t last = -1;
        for (const std::int64_t j : s.row(i))
            if (j / b != last) {
                last = j / b;
                ++n;
            }
    }
    return n;
}

/// Row blocks of b rows with a pair, and their non-empty tiles.
std::pair<std::int64_t, std::int64_t> blocks_and_tiles(const Support& s, std::int64_t b) {
    const auto& view = s.cached_block_view(b, b);
    std::int64_t blocks = 0;
    for (std::int64_t i = 0; i < view.row_blocks; ++i)
        blocks += view.tiles_of(i).empty() ? 0 : 1;
    return {blocks, static_cast<std::int64_t>(view.tiles.size())};
}

} // namespace

TEST_CASE("sparse materialized forward reads the touched K and V rows, Q_i once when d <= w",
          "[sparse][forward][io]") {
    for (const std::string& spec : kRowsPatterns)
        for (const auto& t : {Tiling{Schedule::materialized, 4, 4},
                              Tiling{Schedule::materialized, 8, 8},
                              Tiling{Schedule::materialized, 4, 4, 7}}) {
            CAPTURE(spec, t);
            const Problem p = ioattn::sparse::test::kernel_shape(1, 40, 36, 6); // d_v = 5
            const Support s = ioattn::sparse::parse_pattern(spec, 40, 36, 4);
            Case<float> c(p, 2);
            IoCounter io(ioattn::sparse::test::kAmple.fast_words);
            ioattn::sparse::forward(c.forward(), s, t, ioattn::sparse::test::kAmple, io);
            const std::int64_t keys = seen_keys(s, t.rows) * p.batch_heads();
            CHECK(io.words(Operand::k) == keys * p.d);
            CHECK(io.words(Operand::v) == keys * p.d_v);
            const auto [blocks, tiles] = blocks_and_tiles(s, t.rows);
            const std::int64_t q_reads = p.d <= t.feature_chunk() ? blocks : tiles;
            CHECK(io.words(Operand::q) == q_reads * t.rows * p.d * p.batch_heads());
        }
}

TEST_CASE("sparse materialized backward reads the touched K, V, Q and dO rows",
          "[sparse][backward][io]") {
    for (const std::string& spec : kRowsPatterns)
        for (const auto& t : {Tiling{Schedule::materialized, 4, 4},
                              Tiling{Schedule::materialized, 8, 8},
                              Tiling{Schedule::materialized, 4, 4, 7}}) {
            CAPTURE(spec, t);
            const Problem p = ioattn::sparse::test::backward_shape(40, 36, 6); // d_v = 5
            const Support s = ioattn::sparse::parse_pattern(spec, 40, 36, 4);
            Case<float> c(p, 2);
            ioattn::sparse::test::run_forward_reference(c, s);
            IoCounter io(ioattn::sparse::test::kAmple.fast_words);
            ioattn::sparse::backward(c.backward(), s, t, ioattn::sparse::test::kAmple, io);
            const std::int64_t heads = p.batch_heads();
            const std::int64_t keys = seen_keys(s, t.rows) * heads;
            CHECK(io.words(Operand::k) == 2 * keys * p.d); // P and dQ
            CHECK(io.words(Operand::v) == keys * p.d_v);   // dS
            // Q: in P once per row block when d <= w (else per tile); in dK once per (row, key
            // tile) pair. dO: in D (and dS when d_v <= w) once per row block (else D and per
            // tile), in dV once per (row, key tile) pair.
            const std::int64_t w = t.feature_chunk(), rt = row_tile_pairs(s, t.rows) * heads;
            const auto [blocks, tiles] = blocks_and_tiles(s, t.rows);
            CHECK(io.words(Operand::q) ==
                  (p.d <= w ? blocks : tiles) * t.rows * p.d * heads + rt * p.d);
            CHECK(io.words(Operand::d_o) ==
                  (p.d_v <= w ? blocks : blocks + tiles) * t.rows * p.d_v * heads + rt * p.d_v);
        }
}

TEMPLATE_TEST_CASE("sparse materialized kernels with feature chunks of their own width",
                   "[sparse][forward][backward][io]",
                   float,
                   double) {
    for (const std::string& spec : kRowsPatterns)
        for (const std::int64_t depth : {2, 6, 9}) // chunks of d = 6, d_v = 5, and whole rows
            for (const std::int64_t b : {3, 5}) {
                const Tiling t{Schedule::materialized, b, b, depth};
                CAPTURE(spec, t);
                const Problem p = ioattn::sparse::test::kernel_shape(2, 17, 13, 6);
                const Support s = ioattn::sparse::parse_pattern(spec, 17, 13, 3);
                // forward: O and L against the double reference, counts against the cost
                Case<TestType> c(p, 5);
                const Case<double> ref = ioattn::sparse::test::reference_of(p, c, s);
                const MemoryModel mf{t.resident_words(p, Pass::forward, ioattn::Kernels::sparse)};
                IoCounter io(mf.fast_words);
                ioattn::sparse::forward(c.forward(), s, t, mf, io);
                const double tol = sizeof(TestType) == 4 ? 2e-5 : 1e-13;
                CHECK(ioattn::sparse::test::max_error(c.o, ref.o) < tol);
                ioattn::sparse::test::check_lse(c.lse, ref.lse);
                const auto cost = ioattn::sparse::io_cost_forward(
                    p, s, ioattn::sparse::SparseInputs<TestType>{}, t);
                CHECK(io.report() == cost);
                CHECK(ioattn::sparse::dry_run_forward(
                          p, s, ioattn::sparse::SparseInputs<TestType>{}, t, mf) == cost);
                CHECK_THROWS_AS(
                    ioattn::sparse::forward(c.forward(), s, t, MemoryModel{mf.fast_words - 1}, io),
                    ioattn::CapacityError);
                // backward: gradients against the double reference, counts against the cost
                const MemoryModel mb{t.resident_words(p, Pass::backward, ioattn::Kernels::sparse)};
                ioattn::sparse::test::check_backward_agrees<TestType>(
                    p, s, 8, [&](Case<TestType>& bc, const Support& support) {
                        IoCounter bio(mb.fast_words);
                        ioattn::sparse::backward(bc.backward(), support, t, mb, bio);
                        const auto bcost = ioattn::sparse::io_cost_backward_materialized(
                            p, support, ioattn::sparse::SparseInputs<TestType>{}, t);
                        CHECK(bio.report() == bcost);
                        DryRunCounter dry(mb.fast_words);
                        ioattn::sparse::backward(bc.backward(), support, t, mb, dry);
                        CHECK(dry.report() == bcost);
                        NullCounter none;
                        CHECK_THROWS_AS(
                            ioattn::sparse::backward(
                                bc.backward(), support, t, MemoryModel{mb.fast_words - 1}, none),
                            ioattn::CapacityError);
                    });
            }
}

TEST_CASE("sparse materialized plans for M take whole feature rows where they fit",
          "[sparse][tiling][io]") {
    // d = 64, M = 8192: b = 32 and whole rows (w = 64) fit both passes; the forward then reads
    // Q_i once per row block and the scores once, the backward dO_i once and every chunked
    // pass once, so each moves fewer words than with chunks of b.
    Problem p;
    p.n_q = p.n_k = 512;
    p.d = 64;
    p = p.resolved("test");
    const Support s = ioattn::sparse::parse_pattern("bigbird:16:2:3", 512, 512, 7);
    const MemoryModel m{8192};
    for (const Pass pass : {Pass::forward, Pass::backward}) {
        CAPTURE(ioattn::to_string(pass));
        const Tiling t =
            Tiling::for_memory(Schedule::materialized, m, p, pass, ioattn::Kernels::sparse);
        CHECK(t.rows == 32);
        CHECK(t.depth == 64);
        Tiling chunked = t;
        chunked.depth = 0;
        const auto cost = pass == Pass::forward
                              ? ioattn::sparse::io_cost_forward(p, s, t)
                              : ioattn::sparse::io_cost_backward_materialized(p, s, t);
        const auto chunked_cost =
            pass == Pass::forward ? ioattn::sparse::io_cost_forward(p, s, chunked)
                                  : ioattn::sparse::io_cost_backward_materialized(p, s, chunked);
        CHECK(cost.total() < chunked_cost.total());
        CHECK(cost.peak <= m.fast_words);
        CHECK((pass == Pass::forward ? ioattn::sparse::dry_run_forward(p, s, t, m)
                                     : ioattn::sparse::dry_run_backward(p, s, t, m)) == cost);
    }
}
