// Tests of the sparse backward kernels (backward_reference, backward_fused): agreement with the
// reference on pattern families, the reference against the dense reference and against central
// finite differences (independent of any backward code), exact I/O (counted == cost == dry run,
// reduction to the dense closed form), zero gradient of empty rows, determinism, and dK, dV
// alike on and off a 64-byte boundary (streamed stores).

#include "kernel_case.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

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
using ioattn::sparse::test::backward_shape;
using ioattn::sparse::test::Case;
using ioattn::sparse::test::max_error;
using ioattn::sparse::test::run_forward_reference;

TEMPLATE_TEST_CASE("sparse backward_fused agrees with the reference",
                   "[sparse][backward]",
                   float,
                   double) {
    for (const std::string& spec : ioattn::sparse::test::kBackwardPatterns)
        for (const auto& [n_q, n_k] : ioattn::sparse::test::kBackwardSizes) {
            CAPTURE(spec, n_q, n_k);
            const Problem p = backward_shape(n_q, n_k, 6);
            const Support s = ioattn::sparse::parse_pattern(spec, n_q, n_k, 3);
            ioattn::sparse::test::check_backward_agrees<TestType>(
                p, s, 8, [](Case<TestType>& c, const Support& support) {
                    NullCounter io;
                    ioattn::sparse::backward_fused(c.backward(),
                                                   support,
                                                   Tiling{Schedule::fused, 4, 3},
                                                   MemoryModel{1 << 20},
                                                   io);
                });
        }
}

TEMPLATE_TEST_CASE("sparse backward_fused: rows as a run of keys with extra keys around it",
                   "[sparse][backward]",
                   float,
                   double) {
    // The transposed structure's key rows are runs with extras too; chunk widths cut them.
    const Support s = ioattn::sparse::test::runs_with_extras(96, 80).transposed();
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {16, 16}, {8, 24}, {32, 7}, {1, 64}, {3, 64}}) {
        CAPTURE(rows, cols);
        ioattn::sparse::test::check_backward_agrees<TestType>(
            backward_shape(80, 96, 5), s, 8, [&](Case<TestType>& c, const Support& support) {
                NullCounter io;
                ioattn::sparse::backward_fused(c.backward(),
                                               support,
                                               Tiling{Schedule::fused, rows, cols},
                                               MemoryModel{1 << 22},
                                               io);
            });
    }
}

TEST_CASE("sparse backward reference equals the dense one on dense and causal patterns",
          "[sparse][backward]") {
    for (const bool causal : {false, true}) {
        const Problem p = backward_shape(9, 12, 4);
        const Support s = ioattn::sparse::parse_pattern(causal ? "causal" : "dense", 9, 12, 1);
        Case<double> a(p, 2), b(p, 2);
        run_forward_reference(a, s);
        ioattn::sparse::backward_reference(a.backward(), s);
        auto fa = b.forward();
        fa.problem.causal = causal;
        ioattn::dense::forward_reference(fa);
        auto ba = b.backward();
        ba.problem.causal = causal;
        ioattn::dense::backward_reference(ba);
        CHECK(max_error(a.d_q, b.d_q) < 1e-13);
        CHECK(max_error(a.d_k, b.d_k) < 1e-13);
        CHECK(max_error(a.d_v, b.d_v) < 1e-13);
    }
}

TEST_CASE("sparse backward reference matches central finite differences", "[sparse][backward]") {
    Problem p = backward_shape(5, 6, 3);
    p.heads = 2;
    p.kv_heads = 1;
    const Support s = ioattn::sparse::parse_pattern("random:0.6", 5, 6, 4);
    Case<double> c(p, 6);
    run_forward_reference(c, s);
    ioattn::sparse::backward_reference(c.backward(), s);
    // f = sum(dO o O): its gradient is what the backward computes.
    const auto f = [&](Case<double>& x) {
        run_forward_reference(x, s);
        double acc = 0;
        for (std::size_t i = 0; i < x.o.size(); ++i)
            acc += x.d_o[i] * x.o[i];
        return acc;
    };
    const double h = 1e-6;
    const auto check = [&](std::vector<double> Case<double>::*field,
                           std::vector<double> Case<double>::*grad) {
        for (std::size_t i = 0; i < (c.*field).size(); ++i) {
            Case<double> up(p, 6), down(p, 6);
            (up.*field)[i] += h;
            (down.*field)[i] -= h;
            const double numeric = (f(up) - f(down)) / (2 * h);
            CHECK((c.*grad)[i] == Approx(numeric).margin(1e-7));
        }
    };
    check(&Case<double>::q, &Case<double>::d_q);
    check(&Case<double>::k, &Case<double>::d_k);
    check(&Case<double>::v, &Case<double>::d_v);
}

TEST_CASE("sparse backward counted I/O equals the cost, the dry run, and the dense form",
          "[sparse][backward][io]") {
    for (const std::string spec : {"dense", "causal", "window:3", "bigbird:2:1:2", "random:0.2"})
        for (const auto& t : {Tiling{Schedule::fused, 4, 3}, Tiling{Schedule::fused, 8, 16}}) {
            CAPTURE(spec, t.rows, t.cols);
            const Problem p = backward_shape(21, 17, 6);
            const Support s = ioattn::sparse::parse_pattern(spec, 21, 17, 2);
            Case<float> c(p, 1);
            run_forward_reference(c, s);
            const MemoryModel m{
                t.resident_words(p, ioattn::Pass::backward, ioattn::Kernels::sparse)};
            IoCounter io(m.fast_words);
            ioattn::sparse::backward_fused(c.backward(), s, t, m, io);
            const auto cost = ioattn::sparse::io_cost_backward_fused(p, s, t);
            CHECK(io.report() == cost);
            CHECK(ioattn::sparse::dry_run_backward(p, s, t, m) == cost);
            if (spec == "dense" || spec == "causal") {
                Problem dense = p;
                dense.causal = spec == "causal";
                // the same words (intervals: no index words); each peak is its kernel's own
                // footprint, the sparse one with its gathered rows and indices
                const auto dense_cost = ioattn::io_cost_backward_fused(dense, t);
                CHECK(cost.reads == dense_cost.reads);
                CHECK(cost.writes == dense_cost.writes);
                CHECK(cost.peak ==
                      t.resident_words(p, ioattn::Pass::backward, ioattn::Kernels::sparse));
            }
        }
}

TEST_CASE("sparse backward: empty rows contribute zero, no NaN leak, results thread-count "
          "invariant",
          "[sparse][backward][determinism]") {
    ioattn::sparse::test::check_empty_rows_and_hidden_key([](Case<float>& c, const Support& s) {
        NullCounter io;
        ioattn::sparse::backward_fused(
            c.backward(), s, Tiling{Schedule::fused, 4, 4}, MemoryModel{1 << 20}, io);
    });
}

TEST_CASE("sparse backward_fused writes the same dK and dV on and off a 64-byte boundary",
          "[sparse][backward]") {
    // dK and dV leave a key block through streamed stores where a row's vector starts on a
    // vector boundary (kernels::store_row_vector): buffers on a 64-byte boundary with rows of
    // 48 floats (dK, every row aligned) and 40 (dV, every other one), and one float off it,
    // must hold the same bits.
    Problem p; // one head
    p.n_q = 100;
    p.n_k = 90;
    p.d = 48;
    p.d_v = 40;
    p = p.resolved();
    for (const char* spec : {"window:20+global:2", "dense"}) {
        CAPTURE(spec);
        const Support s = ioattn::sparse::parse_pattern(spec, p.n_q, p.n_k, 5);
        const auto nk = static_cast<std::size_t>(p.n_k * p.d);
        const auto nv = static_cast<std::size_t>(p.n_k * p.d_v);
        std::vector<float> dk_buffer(nk + 32), dv_buffer(nv + 32);
        const auto skip = [](const std::vector<float>& buffer) {
            std::size_t n = 0; // floats to the first 64-byte boundary
            while (reinterpret_cast<std::uintptr_t>(buffer.data() + n) % 64 != 0)
                ++n;
            return n;
        };
        const std::size_t sk = skip(dk_buffer), sv = skip(dv_buffer);
        std::vector<std::vector<float>> dk, dv;
        for (const std::size_t off : {std::size_t{0}, std::size_t{1}}) {
            Case<float> c(p, 7);
            run_forward_reference(c, s);
            auto args = c.backward();
            float* k_out = dk_buffer.data() + sk + off;
            float* v_out = dv_buffer.data() + sv + off;
            args.d_k = ioattn::TensorView<float>::packed(k_out, 1, 1, p.n_k, p.d);
            args.d_v = ioattn::TensorView<float>::packed(v_out, 1, 1, p.n_k, p.d_v);
            NullCounter io;
            ioattn::sparse::backward_fused(
                args, s, Tiling{Schedule::fused, 64, 32}, MemoryModel{1 << 20}, io);
            dk.emplace_back(k_out, k_out + nk);
            dv.emplace_back(v_out, v_out + nv);
        }
        CHECK(dk[0] == dk[1]);
        CHECK(dv[0] == dv[1]);
        Case<float> c(p, 7);
        const Case<double> ref = ioattn::sparse::test::reference_gradients(p, c, s, 7);
        CHECK(max_error(dk[0], ref.d_k) < 1e-4);
        CHECK(max_error(dv[0], ref.d_v) < 1e-4);
    }
}
