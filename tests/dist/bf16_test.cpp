// Tests of the distributed passes with bf16 operands under mpirun (any number of ranks): the ring
// (contiguous and zigzag, causal, GQA, both kernels) and the sparse exchange, forward and
// backward. Each rank checks on its rows that
// - the bf16 results are bit for bit the float pass's on the widened inputs, rounded once (a
//   partial rounded early, or a sum that travels in bf16 before it is finished, breaks this);
// - they agree with the single-process bf16 entry (dense::forward / backward,
//   ioattn::attention / attention_backward) within twice the bound of docs/design.md section 16
//   (both are within it of the exact result on the same bf16 inputs);
// - one thread and all give the same bits;
// - the counted words and bytes equal the closed forms (2 bytes per K/V word).

#include "dist_case.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/dense/backward.hpp>
#include <ioattn/dense/forward.hpp>
#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/dist/ring.hpp>
#include <ioattn/dist/sparse_exchange.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

using namespace ioattn;
using namespace ioattn::dist;
using namespace ioattn::dist::test;

namespace {

constexpr double kBfUnit = 1.0 / 256;              // u: bf16's unit roundoff, 2^-8
constexpr double kBfUnit32 = 1.0 / (1 << 24);      // u32
constexpr double kBfGradientBound = 2.5 * kBfUnit; // section 16: ||G - G_ref|| / ||G_ref||

struct BfCase {
    std::string name;
    Problem p;
    Layout layout;
    Tiling tiling;
    std::string pattern; ///< empty: the ring (dense or causal); else the sparse exchange
};

Problem bf_shape(std::int64_t b,
                 std::int64_t h,
                 std::int64_t g,
                 std::int64_t n_q,
                 std::int64_t n_k,
                 std::int64_t d,
                 bool causal) {
    Problem p;
    p.batch = b;
    p.heads = h;
    p.kv_heads = g;
    p.n_q = n_q;
    p.n_k = n_k;
    p.d = d;
    p.causal = causal;
    return p.resolved();
}

std::vector<BfCase> bf_cases() {
    const Tiling fused{Schedule::fused, 8, 8};
    const Tiling square{Schedule::materialized, 8, 8};
    return {
        {"ring dense", bf_shape(1, 2, 0, 37, 37, 16, false), Layout::contiguous, fused, ""},
        {"ring GQA causal zigzag", bf_shape(2, 4, 2, 41, 41, 8, true), Layout::zigzag, fused, ""},
        {"ring n_q < n_k causal", bf_shape(1, 1, 0, 23, 50, 8, true), Layout::zigzag, fused, ""},
        {"ring materialized causal",
         bf_shape(1, 2, 1, 44, 44, 8, true),
         Layout::contiguous,
         square,
         ""},
        {"sparse window",
         bf_shape(1, 2, 0, 37, 37, 8, false),
         Layout::contiguous,
         fused,
         "window:3"},
        {"sparse bigbird GQA",
         bf_shape(1, 4, 2, 43, 43, 8, false),
         Layout::zigzag,
         fused,
         "bigbird:2:1:2"},
    };
}

/// Q, K, V, dO rounded to bf16 (seeded uniform in [-1, 1)), and the same values widened.
struct BfOperands {
    Problem p;
    Tensor<bf16> q, k, v, d_o;
    Tensor<float> qw, kw, vw, d_ow;

    BfOperands(const Problem& problem, std::uint64_t seed)
        : p(problem) {
        const Global<float> g(problem, seed, [](std::int64_t, std::int64_t) { return false; });
        q = g.q.as<bf16>();
        k = g.k.as<bf16>();
        v = g.v.as<bf16>();
        d_o = g.d_o.as<bf16>();
        qw = q.as<float>();
        kw = k.as<float>();
        vw = v.as<float>();
        d_ow = d_o.as<float>();
    }
};

/// One rank's forward or backward results in T (L in fp32 for bf16).
template <typename T>
struct BfRun {
    Tensor<T> o, dq, dk, dv;
    Tensor<Accumulator<T>> lse;
    PassStats stats;
};

/// This rank's distributed forward of the case: the ring or, with a support, the exchange.
template <typename T>
BfRun<T> bf_forward(const BfCase& c,
                    const sparse::Support* s,
                    const Tensor<T>& q,
                    const Tensor<T>& k,
                    const Tensor<T>& v,
                    int threads) {
    const Problem& p = c.p;
    const Sharding qs(c.layout, p.n_q, world_size());
    const Sharding ks(c.layout, p.n_k, world_size());
    const int r = world_rank();
    const Tensor<T> lq = q.shard(qs, r), lk = k.shard(ks, r), lv = v.shard(ks, r);
    BfRun<T> run;
    run.o = Tensor<T>(p.batch, p.heads, qs.rows(r), p.d_v);
    run.lse = Tensor<Accumulator<T>>(p.batch, p.heads, qs.rows(r), 1);
    const ShardForwardArgs<T> a{
        p, c.layout, lq.cview(), lk.cview(), lv.cview(), run.o.view(), run.lse.view()};
    NullCounter counter;
    PassOptions options;
    options.poll_flops = 1.0; // every piece boundary of the ring
    run.stats = with_parallelism(threads, [&] {
        return s != nullptr
                   ? sparse_forward(MPI_COMM_WORLD, a, *s, c.tiling, kMemory, counter, options)
                   : ring_forward(MPI_COMM_WORLD, a, c.tiling, kMemory, counter, options);
    });
    return run;
}

/// This rank's distributed backward from the given (global) O and L.
template <typename T>
BfRun<T> bf_backward(const BfCase& c,
                     const sparse::Support* s,
                     const Tensor<T>& q,
                     const Tensor<T>& k,
                     const Tensor<T>& v,
                     const Tensor<T>& o,
                     const Tensor<Accumulator<T>>& lse,
                     const Tensor<T>& d_o,
                     int threads) {
    const Problem& p = c.p;
    const Sharding qs(c.layout, p.n_q, world_size());
    const Sharding ks(c.layout, p.n_k, world_size());
    const int r = world_rank();
    const Tensor<T> lq = q.shard(qs, r), lk = k.shard(ks, r), lv = v.shard(ks, r);
    Tensor<T> lo = o.shard(qs, r);
    Tensor<Accumulator<T>> ll = lse.shard(qs, r);
    const Tensor<T> ld_o = d_o.shard(qs, r);
    BfRun<T> run;
    run.dq = Tensor<T>(p.batch, p.heads, qs.rows(r), p.d);
    run.dk = Tensor<T>(p.batch, p.kv_heads, ks.rows(r), p.d);
    run.dv = Tensor<T>(p.batch, p.kv_heads, ks.rows(r), p.d_v);
    ShardBackwardArgs<T> a;
    static_cast<ShardForwardArgs<T>&>(a) = {
        p, c.layout, lq.cview(), lk.cview(), lv.cview(), lo.view(), ll.view()};
    a.d_o = ld_o.cview();
    a.d_q = run.dq.view();
    a.d_k = run.dk.view();
    a.d_v = run.dv.view();
    NullCounter counter;
    PassOptions options;
    options.poll_flops = 1.0;
    run.stats = with_parallelism(threads, [&] {
        return s != nullptr
                   ? sparse_backward(MPI_COMM_WORLD, a, *s, c.tiling, kMemory, counter, options)
                   : ring_backward(MPI_COMM_WORLD, a, c.tiling, kMemory, counter, options);
    });
    return run;
}

/// The single-process bf16 entry on the whole problem: O, L, and the gradients from that O, L.
struct BfSingle {
    Tensor<bf16> o, dq, dk, dv;
    Tensor<float> lse;
};

/// The single-process entry's options for a sparse support.
AttentionOptions bf_single_options() {
    AttentionOptions o;
    o.schedule = Schedule::fused;
    o.memory = kMemory;
    return o;
}

BfSingle bf_single(const BfCase& c, const sparse::Support* s, const BfOperands& x) {
    const Problem& p = c.p;
    BfSingle r{Tensor<bf16>(p.batch, p.heads, p.n_q, p.d_v),
               Tensor<bf16>(p.batch, p.heads, p.n_q, p.d),
               Tensor<bf16>(p.batch, p.kv_heads, p.n_k, p.d),
               Tensor<bf16>(p.batch, p.kv_heads, p.n_k, p.d_v),
               Tensor<float>(p.batch, p.heads, p.n_q, 1)};
    const ForwardArgs<bf16> f{p, x.q.cview(), x.k.cview(), x.v.cview(), r.o.view(), r.lse.view()};
    BackwardArgs<bf16> b;
    static_cast<ForwardArgs<bf16>&>(b) = f;
    b.d_o = x.d_o.cview();
    b.d_q = r.dq.view();
    b.d_k = r.dk.view();
    b.d_v = r.dv.view();
    NullCounter counter;
    if (s == nullptr) {
        dense::forward(f, c.tiling, kMemory, counter);
        dense::backward(b, c.tiling, kMemory, counter);
        return r;
    }
    const Structure<bf16> st{s, {}};
    (void)ioattn::attention<bf16>(f, st, bf_single_options());
    (void)ioattn::attention_backward<bf16>(b, st, bf_single_options());
    return r;
}

/// Whether bf_single's forward ran a native bf16 kernel (it rounds P to bf16).
bool bf_single_native(const BfCase& c, const sparse::Support* s) {
    if (s == nullptr)
        return c.tiling.schedule == Schedule::fused && bf16_kernels_native();
    const Structure<bf16> st{s, {}};
    return bf16_runs_native(plan_attention<bf16>(c.p, Pass::forward, st, bf_single_options()), st);
}

double bf_max_abs(const Tensor<float>& a) {
    double m = 0;
    for (const float x : a.data)
        m = std::max(m, std::fabs(static_cast<double>(x)));
    return m;
}

/// max |a - b| (bf16 and fp32 values alike, as double).
template <typename A, typename B>
double bf_max_diff(const Tensor<A>& a, const Tensor<B>& b) {
    double m = 0;
    for (std::size_t e = 0; e < a.data.size(); ++e) {
        const double d = std::fabs(static_cast<double>(static_cast<float>(a.data[e])) -
                                   static_cast<double>(static_cast<float>(b.data[e])));
        m = std::isnan(d) ? d : std::max(m, d);
    }
    return m;
}

/// ||a - b||_F / ||b||_F.
double bf_relative(const Tensor<bf16>& a, const Tensor<bf16>& b) {
    double num = 0, den = 0;
    for (std::size_t e = 0; e < a.data.size(); ++e) {
        const double x = static_cast<float>(a.data[e]);
        const double y = static_cast<float>(b.data[e]);
        num += (x - y) * (x - y);
        den += y * y;
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::optional<sparse::Support> bf_support(const BfCase& c) {
    if (c.pattern.empty())
        return std::nullopt;
    return sparse::parse_pattern(c.pattern, c.p.n_q, c.p.n_k, 11);
}

} // namespace

TEST_CASE("bf16 distributed forward: the float pass rounded once, within the bf16 bound of the "
          "single-process entry, counted bytes = closed form",
          "[bf16]") {
    const int r = world_rank();
    for (const BfCase& c : bf_cases()) {
        CAPTURE(c.name, world_size(), r);
        const std::optional<sparse::Support> support = bf_support(c);
        const sparse::Support* s = support ? &*support : nullptr;
        const BfOperands x(c.p, 2027);
        const Problem& p = c.p;
        const Sharding qs(c.layout, p.n_q, world_size());
        const Sharding ks(c.layout, p.n_k, world_size());
        const BfRun<bf16> run = bf_forward(c, s, x.q, x.k, x.v, 0);
        const BfRun<float> wide = bf_forward(c, s, x.qw, x.kw, x.vw, 0);
        const BfRun<bf16> one = bf_forward(c, s, x.q, x.k, x.v, 1);
        const bool rounded_once = bitwise(run.o, wide.o.as<bf16>()) && bitwise(run.lse, wide.lse);
        CHECK(rounded_once);
        CHECK(bitwise(run.o, one.o));
        CHECK(bitwise(run.lse, one.lse));

        const BfSingle single = bf_single(c, s, x);
        const Tensor<float> so = single.o.shard(qs, r).as<float>();
        const Tensor<float> sl = single.lse.shard(qs, r);
        // section 16, twice: |O - O_ref| <= (u + 2 (n_k + d) u32) max|O_ref| for either run,
        // plus u max|V| where the single-process forward ran a native kernel (it rounds P to
        // bf16: the dense fused forward, the sparse tile variant)
        const bool native = bf_single_native(c, s);
        const double bound_o =
            2 * (kBfUnit + 2.0 * static_cast<double>(p.n_k + p.d) * kBfUnit32) * bf_max_abs(so) +
            (native ? kBfUnit * bf_max_abs(x.vw) : 0.0);
        const double bound_l =
            4.0 * static_cast<double>(p.n_k + p.d) * kBfUnit32 * (1 + bf_max_abs(sl));
        const double err_o = bf_max_diff(run.o, so);
        const double err_l = bf_max_diff(run.lse, sl);
        INFO("O diff " << err_o << " bound " << bound_o << "; L diff " << err_l << " bound "
                       << bound_l);
        CHECK(err_o <= bound_o);
        CHECK(err_l <= bound_l);

        const CommReport closed =
            s != nullptr ? comm_cost_sparse_forward(p, *s, qs, ks, r, wire_bytes_of<bf16>())
                         : comm_cost_ring_forward(p, ks, r, wire_bytes_of<bf16>());
        CHECK(run.stats.comm == closed);
        CHECK(run.stats.comm.sent_bytes == 2 * run.stats.comm.sent_words);
        CHECK(run.stats.comm.received_bytes == 2 * run.stats.comm.received_words);
        CHECK(2 * run.stats.comm.received_bytes == wide.stats.comm.received_bytes);
        CHECK(all_ranks(rounded_once && err_o <= bound_o && run.stats.comm == closed));
    }
}

TEST_CASE("bf16 distributed backward: fp32 sums rounded once, within the bf16 bound of the "
          "single-process entry, counted bytes = closed form",
          "[bf16]") {
    const int r = world_rank();
    for (const BfCase& c : bf_cases()) {
        CAPTURE(c.name, world_size(), r);
        const std::optional<sparse::Support> support = bf_support(c);
        const sparse::Support* s = support ? &*support : nullptr;
        const BfOperands x(c.p, 4049);
        const Problem& p = c.p;
        const Sharding qs(c.layout, p.n_q, world_size());
        const Sharding ks(c.layout, p.n_k, world_size());
        // both runs start from the single-process bf16 forward's O (bf16) and L (fp32)
        const BfSingle single = bf_single(c, s, x);
        const Tensor<float> ow = single.o.as<float>();
        const BfRun<bf16> run = bf_backward(c, s, x.q, x.k, x.v, single.o, single.lse, x.d_o, 0);
        const BfRun<float> wide = bf_backward(c, s, x.qw, x.kw, x.vw, ow, single.lse, x.d_ow, 0);
        const BfRun<bf16> one = bf_backward(c, s, x.q, x.k, x.v, single.o, single.lse, x.d_o, 1);
        const bool rounded_once = bitwise(run.dq, wide.dq.as<bf16>()) &&
                                  bitwise(run.dk, wide.dk.as<bf16>()) &&
                                  bitwise(run.dv, wide.dv.as<bf16>());
        CHECK(rounded_once);
        CHECK(bitwise(run.dq, one.dq));
        CHECK(bitwise(run.dk, one.dk));
        CHECK(bitwise(run.dv, one.dv));

        // section 16, twice: ||G - G_ref||_F / ||G_ref||_F <= 2.5 u for either run
        const double eq = bf_relative(run.dq, single.dq.shard(qs, r));
        const double ek = bf_relative(run.dk, single.dk.shard(ks, r));
        const double ev = bf_relative(run.dv, single.dv.shard(ks, r));
        INFO("dQ " << eq << " dK " << ek << " dV " << ev << " bound " << 2 * kBfGradientBound);
        CHECK(eq <= 2 * kBfGradientBound);
        CHECK(ek <= 2 * kBfGradientBound);
        CHECK(ev <= 2 * kBfGradientBound);

        const CommReport closed =
            s != nullptr ? comm_cost_sparse_backward(p, *s, qs, ks, r, wire_bytes_of<bf16>())
                         : comm_cost_ring_backward(p, ks, r, wire_bytes_of<bf16>());
        CHECK(run.stats.comm == closed);
        CHECK(wide.stats.comm.received_words == run.stats.comm.received_words);
        CHECK(all_ranks(rounded_once && run.stats.comm == closed));
    }
}
