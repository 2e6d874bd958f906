// Tests of the sparse kernels with sparse inputs (Q, K, V as CSR rows over d, SparseInputs):
// every forward and backward kernel against the references with the same sparse inputs and the
// dense references on the densified values (error rule in float, tight in double), dense
// gradients equal to the dense-input backward, exact I/O (counted == cost == dry run, below the
// dense count when zeros are not stored, equal to it when every entry is stored), non-finite
// stored values treated as the same dense values, determinism across thread counts, and the
// throws on mismatched shapes.

#include "brute_force.hpp"
#include "kernel_case.hpp"

#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using ioattn::DryRunCounter;
using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::sparse::SparseInputs;
using ioattn::sparse::SparseRows;
using ioattn::sparse::Support;
using ioattn::sparse::test::Case;
using ioattn::sparse::test::max_error;

namespace {

/// Two batches, 4 query heads on 2 key/value heads (GQA), d_v = 5.
Problem shape(std::int64_t n_q, std::int64_t n_k, std::int64_t d) {
    Problem p = ioattn::sparse::test::backward_shape(n_q, n_k, d);
    p.batch = 2;
    return p.resolved();
}

/// Window, BigBird, random, and a pattern with empty rows (every third query sees nothing).
Support pattern(const std::string& name, std::int64_t n_q, std::int64_t n_k) {
    if (name == "empty-rows")
        return ioattn::sparse::test::from_predicate(n_q, n_k, [](std::int64_t i, std::int64_t j) {
            return i % 3 != 0 && (i + 2 * j) % 5 != 0;
        });
    return ioattn::sparse::parse_pattern(name, n_q, n_k, 7);
}

const std::vector<std::string> kPatterns = {
    "window:3", "bigbird:2:1:2", "random:0.3", "empty-rows"};

/// The operands of a case stored sparse: "q", "kv" or "qkv".
template <typename T>
struct Sparse {
    std::optional<SparseRows<T>> q, k, v;

    [[nodiscard]] SparseInputs<T> inputs() const {
        return {q ? &*q : nullptr, k ? &*k : nullptr, v ? &*v : nullptr};
    }
};

/// The entries x != 0 of a row-major matrix (NaN included), as CSR rows.
template <typename T>
SparseRows<T> store_nonzeros(const std::vector<T>& x, std::int64_t cols) {
    const std::int64_t rows = static_cast<std::int64_t>(x.size()) / cols;
    std::vector<std::int64_t> offsets{0}, indices;
    std::vector<T> values;
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j) {
            const T e = x[static_cast<std::size_t>(i * cols + j)];
            if (e != T(0)) {
                indices.push_back(j);
                values.push_back(e);
            }
        }
        offsets.push_back(static_cast<std::int64_t>(indices.size()));
    }
    return {rows, cols, std::move(offsets), std::move(indices), std::move(values)};
}

/// Zeroes the chosen operands of c below `cut` (ReLU-like features; cut = -2 keeps every entry)
/// and every fourth row entirely, and stores them sparse (exact zeros dropped).
template <typename T>
Sparse<T> sparsify(Case<T>& c, const std::string& which, double cut) {
    const Problem& p = c.p;
    const auto relu = [&](std::vector<T>& x, std::int64_t cols) {
        for (std::size_t e = 0; e < x.size(); ++e) {
            const bool empty_row = cut > -1 && e / static_cast<std::size_t>(cols) % 4 == 1;
            if (empty_row || static_cast<double>(x[e]) < cut)
                x[e] = T(0);
        }
        return store_nonzeros(x, cols);
    };
    Sparse<T> s;
    if (which.find('q') != std::string::npos)
        s.q = relu(c.q, p.d);
    if (which.find('k') != std::string::npos)
        s.k = relu(c.k, p.d);
    if (which.find('v') != std::string::npos)
        s.v = relu(c.v, p.d_v);
    return s;
}

/// Forward arguments of c with null data for the operands given sparse (never read).
template <typename T>
ioattn::ForwardArgs<T> forward_args(Case<T>& c, const SparseInputs<T>& in) {
    auto a = c.forward();
    a.q.data = in.q != nullptr ? nullptr : a.q.data;
    a.k.data = in.k != nullptr ? nullptr : a.k.data;
    a.v.data = in.v != nullptr ? nullptr : a.v.data;
    return a;
}

template <typename T>
ioattn::BackwardArgs<T> backward_args(Case<T>& c, const SparseInputs<T>& in) {
    auto a = c.backward();
    static_cast<ioattn::ForwardArgs<T>&>(a) = forward_args(c, in);
    return a;
}

/// A double case holding the same (densified) values as c.
template <typename T>
Case<double> as_double_case(const Case<T>& c, std::uint64_t seed) {
    Case<double> d(c.p, seed);
    d.q.assign(c.q.begin(), c.q.end());
    d.k.assign(c.k.begin(), c.k.end());
    d.v.assign(c.v.begin(), c.v.end());
    d.d_o.assign(c.d_o.begin(), c.d_o.end());
    return d;
}

const Tiling kFused{Schedule::fused, 4, 3};
const Tiling kMaterialized{Schedule::materialized, 3, 3};

} // namespace

TEMPLATE_TEST_CASE("sparse inputs: forward kernels agree with the sparse and dense references",
                   "[sparse][inputs][forward]",
                   float,
                   double) {
    using T = TestType;
    for (const auto& [n_q, n_k] : std::vector<std::pair<int, int>>{{13, 17}, {17, 11}})
        for (const std::string& spec : kPatterns)
            for (const std::string which : {"q", "kv", "qkv"}) {
                CAPTURE(n_q, n_k, spec, which);
                const Problem p = shape(n_q, n_k, 7);
                const Support s = pattern(spec, n_q, n_k);
                Case<T> base(p, 5);
                const Sparse<T> sp = sparsify(base, which, 0.1);
                Case<double> oracle = as_double_case(base, 5), sref = as_double_case(base, 5);
                ioattn::sparse::forward_reference(oracle.forward(), s);
                const Sparse<double> spd = sparsify(sref, which, 0.1);
                ioattn::sparse::forward_reference(
                    forward_args(sref, spd.inputs()), s, spd.inputs());
                CHECK(max_error(sref.o, oracle.o) < 1e-13);
                CHECK(max_error(sref.lse, oracle.lse) < 1e-13);
                const double naive =
                    max_error(ioattn::sparse::test::naive_output(base, s), oracle.o);
                const double tiny = 8 * static_cast<double>(std::numeric_limits<T>::epsilon());
                for (const Tiling& t :
                     {kFused, kMaterialized, Tiling{Schedule::materialized, 4, 4}}) {
                    CAPTURE(ioattn::to_string(t.schedule), t.rows);
                    Case<T> c = base;
                    NullCounter io;
                    ioattn::sparse::forward(
                        forward_args(c, sp.inputs()), s, sp.inputs(), t, MemoryModel{1 << 20}, io);
                    CHECK(max_error(c.o, oracle.o) <= 2 * naive + tiny);
                    ioattn::sparse::test::check_lse(c.lse, oracle.lse);
                }
            }
}

TEMPLATE_TEST_CASE("sparse inputs: backward kernels agree with the references and return dense "
                   "gradients equal to the dense-input backward",
                   "[sparse][inputs][backward]",
                   float,
                   double) {
    using T = TestType;
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-13;
    for (const auto& [n_q, n_k] : std::vector<std::pair<int, int>>{{11, 13}, {13, 7}})
        for (const std::string& spec : kPatterns)
            for (const std::string which : {"q", "kv", "qkv"}) {
                CAPTURE(n_q, n_k, spec, which);
                const Problem p = shape(n_q, n_k, 6);
                const Support s = pattern(spec, n_q, n_k);
                Case<T> base(p, 8);
                const Sparse<T> sp = sparsify(base, which, 0.0);
                ioattn::sparse::forward_reference(base.forward(), s);
                Case<double> oracle = as_double_case(base, 8), sref = as_double_case(base, 8);
                ioattn::sparse::forward_reference(oracle.forward(), s);
                ioattn::sparse::backward_reference(oracle.backward(), s);
                const Sparse<double> spd = sparsify(sref, which, 0.0);
                sref.o = oracle.o;
                sref.lse = oracle.lse;
                ioattn::sparse::backward_reference(
                    backward_args(sref, spd.inputs()), s, spd.inputs());
                CHECK(max_error(sref.d_q, oracle.d_q) < 1e-13);
                CHECK(max_error(sref.d_k, oracle.d_k) < 1e-13);
                CHECK(max_error(sref.d_v, oracle.d_v) < 1e-13);
                for (const Tiling& t :
                     {kFused, kMaterialized, Tiling{Schedule::materialized, 4, 4}}) {
                    CAPTURE(ioattn::to_string(t.schedule), t.rows);
                    Case<T> c = base, dense = base;
                    NullCounter io;
                    ioattn::sparse::backward(
                        backward_args(c, sp.inputs()), s, sp.inputs(), t, MemoryModel{1 << 20}, io);
                    ioattn::sparse::backward(dense.backward(), s, t, MemoryModel{1 << 20}, io);
                    CHECK(max_error(c.d_q, oracle.d_q) < tol);
                    CHECK(max_error(c.d_k, oracle.d_k) < tol);
                    CHECK(max_error(c.d_v, oracle.d_v) < tol);
                    CHECK(max_error(c.d_q, dense.d_q) < tol);
                    CHECK(max_error(c.d_k, dense.d_k) < tol);
                    CHECK(max_error(c.d_v, dense.d_v) < tol);
                }
            }
}

TEST_CASE("sparse inputs: gradients are dense where the inputs store nothing",
          "[sparse][inputs][backward]") {
    const Problem p = shape(12, 12, 6);
    const Support s = pattern("window:3", 12, 12);
    Case<double> c(p, 3);
    const Sparse<double> sp = sparsify(c, "qkv", 0.0);
    ioattn::sparse::forward_reference(c.forward(), s);
    NullCounter io;
    ioattn::sparse::backward_fused(
        backward_args(c, sp.inputs()), s, sp.inputs(), kFused, MemoryModel{1 << 20}, io);
    std::int64_t unstored = 0, nonzero = 0;
    for (std::size_t e = 0; e < c.q.size(); ++e)
        if (c.q[e] == 0.0) {
            ++unstored;
            nonzero += c.d_q[e] != 0.0 ? 1 : 0;
        }
    CHECK(unstored > 0);
    CHECK(nonzero > unstored / 2);
}

TEST_CASE("sparse inputs: counted I/O equals the cost and the dry run, below the dense count",
          "[sparse][inputs][io]") {
    for (const std::string& spec : kPatterns)
        for (const Tiling& t : {kFused,
                                Tiling{Schedule::fused, 7, 16},
                                kMaterialized,
                                Tiling{Schedule::materialized, 5, 5},
                                Tiling{Schedule::materialized, 5, 5, 7}}) // whole rows
            for (const Pass pass : {Pass::forward, Pass::backward})
                for (const double cut : {0.0, -2.0}) { // ReLU zeros, or every entry stored
                    CAPTURE(spec, ioattn::to_string(t.schedule), t.rows, t.cols, cut);
                    CAPTURE(pass == Pass::forward ? "forward" : "backward");
                    const Problem p = shape(17, 13, 7);
                    const Support s = pattern(spec, 17, 13);
                    Case<float> c(p, 1);
                    const Sparse<float> sp = sparsify(c, "qkv", cut);
                    const SparseInputs<float> in = sp.inputs();
                    ioattn::sparse::forward_reference(c.forward(), s);
                    const MemoryModel m{t.resident_words(p, pass, ioattn::Kernels::sparse)};
                    IoCounter io(m.fast_words), dense(m.fast_words);
                    ioattn::IoReport cost, dry;
                    if (pass == Pass::forward) {
                        ioattn::sparse::forward(forward_args(c, in), s, in, t, m, io);
                        ioattn::sparse::forward(c.forward(), s, t, m, dense);
                        cost = ioattn::sparse::io_cost_forward(p, s, in, t);
                        dry = ioattn::sparse::dry_run_forward(p, s, in, t, m);
                    } else {
                        ioattn::sparse::backward(backward_args(c, in), s, in, t, m, io);
                        ioattn::sparse::backward(c.backward(), s, t, m, dense);
                        cost = t.schedule == Schedule::fused
                                   ? ioattn::sparse::io_cost_backward_fused(p, s, in, t)
                                   : ioattn::sparse::io_cost_backward_materialized(p, s, in, t);
                        dry = ioattn::sparse::dry_run_backward(p, s, in, t, m);
                    }
                    CHECK(io.report() == cost);
                    CHECK(dry == cost);
                    CHECK(cost.peak <= m.fast_words);
                    CHECK(cost.writes == dense.report().writes);
                    CHECK(cost.peak == dense.report().peak);
                    if (cut < -1)
                        CHECK(cost.reads == dense.report().reads);
                    else
                        CHECK(cost.reads < dense.report().reads);
                }
}

TEST_CASE("sparse inputs: one sparse operand's reads drop by exactly its unstored words "
          "(materialized forward, one tile)",
          "[sparse][inputs][io]") {
    // One b x b tile holds everything and d, d_v <= b: Q_i, K_j and V_j are read once per
    // query slice (K, V once per query head of their group), so the saving is exactly the
    // unstored words of the operand, K and V counted group times.
    const Problem p = shape(6, 6, 3);
    const Support s = pattern("window:2", 6, 6);
    const Tiling t{Schedule::materialized, 8, 8};
    for (const std::string which : {"q", "kv"}) {
        Case<float> c(p, 2);
        const Sparse<float> sp = sparsify(c, which, 0.0);
        const std::int64_t dense_words =
            which == "q" ? p.batch_heads() * p.n_q * p.d : p.batch_heads() * p.n_k * (p.d + p.d_v);
        const std::int64_t stored =
            which == "q" ? sp.q->nonzeros() : p.group() * (sp.k->nonzeros() + sp.v->nonzeros());
        CHECK(ioattn::sparse::io_cost_forward_materialized(p, s, sp.inputs(), t).reads ==
              ioattn::sparse::io_cost_forward_materialized(p, s, t).reads - dense_words + stored);
    }
}

TEST_CASE("sparse inputs: non-finite stored values act as the same dense values",
          "[sparse][inputs]") {
    constexpr std::int64_t kHidden = 4; // a key no query may see
    const Problem p = shape(10, 9, 5);
    const Support s = ioattn::sparse::test::from_predicate(
        10, 9, [](std::int64_t i, std::int64_t j) { return j != kHidden && (i + j) % 3 != 0; });
    Case<float> base(p, 6);
    for (std::int64_t g = 0; g < p.batch * p.kv_heads; ++g) {
        base.k[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d + 1)] =
            std::numeric_limits<float>::quiet_NaN();
        base.v[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d_v + 2)] =
            std::numeric_limits<float>::infinity();
    }
    const Sparse<float> sp = sparsify(base, "kv", 0.0);
    ioattn::sparse::forward_reference(base.forward(), s);
    const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        for (std::size_t e = 0; e < a.size(); ++e) {
            CHECK(std::isfinite(a[e]) == std::isfinite(b[e]));
            if (std::isfinite(a[e]) && std::isfinite(b[e]))
                CHECK(std::fabs(a[e] - b[e]) < 2e-5F);
        }
    };
    for (const Tiling& t : {kFused, kMaterialized}) {
        CAPTURE(ioattn::to_string(t.schedule));
        Case<float> c = base, dense = base;
        NullCounter io;
        ioattn::sparse::forward(
            forward_args(c, sp.inputs()), s, sp.inputs(), t, MemoryModel{1 << 20}, io);
        ioattn::sparse::forward(dense.forward(), s, t, MemoryModel{1 << 20}, io);
        same(c.o, dense.o);
        same(c.lse, dense.lse);
        c = base;
        dense = base;
        ioattn::sparse::backward(
            backward_args(c, sp.inputs()), s, sp.inputs(), t, MemoryModel{1 << 20}, io);
        ioattn::sparse::backward(dense.backward(), s, t, MemoryModel{1 << 20}, io);
        same(c.d_q, dense.d_q);
        same(c.d_k, dense.d_k);
        same(c.d_v, dense.d_v);
        for (const float x : c.d_q)
            CHECK(std::isfinite(x));
    }
}

TEST_CASE("sparse inputs: results are bitwise independent of the thread count",
          "[sparse][inputs][determinism]") {
    const Problem p = shape(40, 33, 9);
    const Support s = pattern("bigbird:3:2:3", 40, 33);
    for (const Tiling& t : {Tiling{Schedule::fused, 8, 5}, Tiling{Schedule::materialized, 4, 4}}) {
        CAPTURE(ioattn::to_string(t.schedule));
        Case<float> base(p, 2);
        const Sparse<float> sp = sparsify(base, "qkv", 0.0);
        const SparseInputs<float> in = sp.inputs();
        ioattn::sparse::forward_reference(base.forward(), s);
        Case<float> one = base, two = base;
        for (const auto& [threads, c] : {std::pair{1, &one}, std::pair{2, &two}})
            ioattn::with_threads(threads, [&, c = c] {
                NullCounter io;
                ioattn::sparse::forward(forward_args(*c, in), s, in, t, MemoryModel{1 << 20}, io);
                c->o = base.o; // the backward reads the same forward outputs in both runs
                c->lse = base.lse;
                ioattn::sparse::backward(backward_args(*c, in), s, in, t, MemoryModel{1 << 20}, io);
            });
        CHECK(one.d_q == two.d_q);
        CHECK(one.d_k == two.d_k);
        CHECK(one.d_v == two.d_v);
        Case<float> fo = base, ft = base;
        for (const auto& [threads, c] : {std::pair{1, &fo}, std::pair{2, &ft}})
            ioattn::with_threads(threads, [&, c = c] {
                NullCounter io;
                ioattn::sparse::forward(forward_args(*c, in), s, in, t, MemoryModel{1 << 20}, io);
            });
        CHECK(fo.o == ft.o);
        CHECK(fo.lse == ft.lse);
    }
}

TEST_CASE("sparse inputs: a sparse operand of the wrong shape throws", "[sparse][inputs][throws]") {
    const Problem p = shape(8, 10, 4);
    const Support s = pattern("window:2", 8, 10);
    Case<float> c(p, 1);
    const Sparse<float> sp = sparsify(c, "qkv", 0.0);
    ioattn::sparse::forward_reference(c.forward(), s);
    const MemoryModel m{1 << 20};
    NullCounter io;
    // K's rows as Q (too many rows), Q's rows as K, V's rows (d_v columns) as K
    for (const SparseInputs<float> bad : {SparseInputs<float>{&*sp.k, nullptr, nullptr},
                                          SparseInputs<float>{nullptr, &*sp.q, nullptr},
                                          SparseInputs<float>{nullptr, &*sp.v, nullptr},
                                          SparseInputs<float>{nullptr, nullptr, &*sp.k}}) {
        for (const Tiling& t : {kFused, kMaterialized}) {
            CHECK_THROWS_AS(ioattn::sparse::forward(forward_args(c, bad), s, bad, t, m, io),
                            ioattn::InvalidArgument);
            CHECK_THROWS_AS(ioattn::sparse::backward(backward_args(c, bad), s, bad, t, m, io),
                            ioattn::InvalidArgument);
            CHECK_THROWS_AS(ioattn::sparse::dry_run_forward(p, s, bad, t, m),
                            ioattn::InvalidArgument);
            CHECK_THROWS_AS(ioattn::sparse::dry_run_backward(p, s, bad, t, m),
                            ioattn::InvalidArgument);
            CHECK_THROWS_AS(ioattn::sparse::io_cost_forward(p, s, bad, t), ioattn::InvalidArgument);
        }
        CHECK_THROWS_AS(ioattn::sparse::backward_reference(backward_args(c, bad), s, bad),
                        ioattn::InvalidArgument);
        CHECK_THROWS_AS(ioattn::sparse::io_cost_backward_fused(p, s, bad, kFused),
                        ioattn::InvalidArgument);
        CHECK_THROWS_AS(ioattn::sparse::io_cost_backward_materialized(p, s, bad, kMaterialized),
                        ioattn::InvalidArgument);
    }
    try {
        const SparseInputs<float> bad{nullptr, &*sp.q, nullptr};
        ioattn::sparse::backward_materialized(backward_args(c, bad), s, bad, kMaterialized, m, io);
        FAIL("no throw");
    } catch (const ioattn::InvalidArgument& e) {
        const std::string what = e.what();
        CHECK(what.find("ioattn::sparse::backward_materialized") != std::string::npos);
        CHECK(what.find("sparse k is 64 x 4, expected 40 x 4") != std::string::npos);
    }
    // a dense operand (not given sparse) still needs data
    auto a = backward_args(c, SparseInputs<float>{&*sp.q, nullptr, nullptr});
    a.k.data = nullptr;
    CHECK_THROWS_AS(ioattn::sparse::backward_fused(
                        a, s, SparseInputs<float>{&*sp.q, nullptr, nullptr}, kFused, m, io),
                    ioattn::InvalidArgument);
}
