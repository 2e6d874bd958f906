// Tests of ioattn::dist::ring_forward and ring_backward under mpirun (any number of ranks):
// dense, causal with contiguous and zigzag sharding, GQA, n_q != n_k, n not divisible by P,
// fused and materialized kernels, float and double. Each rank checks its own rows against the
// single-process kernels (error rule against a naive oracle), counted words == closed form,
// reruns and one thread bitwise equal, and the kernel calls a causal mask leaves.

#include "dist_case.hpp"

#include <ioattn/dense/backward.hpp>
#include <ioattn/dense/forward.hpp>
#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/dist/ring.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ioattn;
using namespace ioattn::dist;
using namespace ioattn::dist::test;

namespace {

struct RingCase {
    std::string name;
    Problem p;
    Layout layout;
    Tiling tiling;
};

Problem shape(std::int64_t b,
              std::int64_t h,
              std::int64_t g,
              std::int64_t n_q,
              std::int64_t n_k,
              std::int64_t d,
              std::int64_t d_v,
              bool causal) {
    Problem p;
    p.batch = b;
    p.heads = h;
    p.kv_heads = g;
    p.n_q = n_q;
    p.n_k = n_k;
    p.d = d;
    p.d_v = d_v;
    p.causal = causal;
    return p;
}

std::vector<RingCase> ring_cases() {
    const Tiling fused{Schedule::fused, 8, 8};
    const Tiling square{Schedule::materialized, 8, 8};
    return {
        {"dense", shape(1, 2, 0, 37, 37, 8, 0, false), Layout::contiguous, fused},
        {"causal contiguous", shape(1, 2, 0, 45, 45, 8, 0, true), Layout::contiguous, fused},
        {"causal zigzag", shape(1, 2, 0, 53, 53, 8, 0, true), Layout::zigzag, fused},
        {"GQA causal zigzag", shape(2, 4, 2, 41, 41, 8, 4, true), Layout::zigzag, fused},
        {"MQA dense zigzag", shape(1, 3, 1, 30, 47, 4, 0, false), Layout::zigzag, fused},
        {"n_q > n_k causal", shape(1, 2, 0, 40, 29, 8, 0, true), Layout::contiguous, fused},
        {"n_q < n_k causal zigzag", shape(1, 1, 0, 23, 50, 8, 0, true), Layout::zigzag, fused},
        {"materialized causal", shape(1, 2, 1, 44, 44, 8, 0, true), Layout::contiguous, square},
    };
}

Allowed causal_mask(const Problem& p) {
    return [p](std::int64_t i, std::int64_t j) { return !p.causal || j <= i + p.n_k - p.n_q; };
}

/// One rank's forward run: its outputs and stats.
template <typename T>
struct ForwardRun {
    Tensor<T> o, lse;
    PassStats stats;
};

template <typename T>
ForwardRun<T>
run_forward(const Global<T>& g, const RingCase& c, const PassOptions& options, int threads = 0) {
    const Problem& p = g.p;
    const Sharding qs(c.layout, p.n_q, world_size());
    const Sharding ks(c.layout, p.n_k, world_size());
    const int r = world_rank();
    const Tensor<T> q = g.q.shard(qs, r), k = g.k.shard(ks, r), v = g.v.shard(ks, r);
    ForwardRun<T> run{Tensor<T>(p.batch, p.heads, qs.rows(r), p.d_v),
                      Tensor<T>(p.batch, p.heads, qs.rows(r), 1),
                      {}};
    const ShardForwardArgs<T> a{
        p, c.layout, q.cview(), k.cview(), v.cview(), run.o.view(), run.lse.view()};
    NullCounter counter;
    run.stats = with_parallelism(threads, [&] {
        return ring_forward(MPI_COMM_WORLD, a, c.tiling, kMemory, counter, options);
    });
    return run;
}

template <typename T>
struct BackwardRun {
    Tensor<T> dq, dk, dv;
    PassStats stats;
};

template <typename T>
BackwardRun<T>
run_backward(const Global<T>& g, const RingCase& c, const PassOptions& options, int threads = 0) {
    const Problem& p = g.p;
    const Sharding qs(c.layout, p.n_q, world_size());
    const Sharding ks(c.layout, p.n_k, world_size());
    const int r = world_rank();
    const Tensor<T> q = g.q.shard(qs, r), k = g.k.shard(ks, r), v = g.v.shard(ks, r);
    Tensor<T> o = g.o.shard(qs, r), lse = g.lse.shard(qs, r);
    const Tensor<T> d_o = g.d_o.shard(qs, r);
    BackwardRun<T> run{Tensor<T>(p.batch, p.heads, qs.rows(r), p.d),
                       Tensor<T>(p.batch, p.kv_heads, ks.rows(r), p.d),
                       Tensor<T>(p.batch, p.kv_heads, ks.rows(r), p.d_v),
                       {}};
    ShardBackwardArgs<T> a;
    static_cast<ShardForwardArgs<T>&>(a) = {
        p, c.layout, q.cview(), k.cview(), v.cview(), o.view(), lse.view()};
    a.d_o = d_o.cview();
    a.d_q = run.dq.view();
    a.d_k = run.dk.view();
    a.d_v = run.dv.view();
    NullCounter counter;
    run.stats = with_parallelism(threads, [&] {
        return ring_backward(MPI_COMM_WORLD, a, c.tiling, kMemory, counter, options);
    });
    return run;
}

/// Pieces of one kernel tile: every piece boundary of the schedule is exercised.
PassOptions small_pieces(bool beside = true) {
    PassOptions o;
    o.poll_flops = 1.0;
    o.progress_beside = beside;
    return o;
}

} // namespace

TEMPLATE_TEST_CASE("ring_forward agrees with the single-process kernel", "[ring]", float, double) {
    using T = TestType;
    const int r = world_rank();
    for (const RingCase& c : ring_cases()) {
        CAPTURE(c.name, world_size(), r);
        const Global<T> g(c.p, 2024, causal_mask(c.p));
        const Problem& p = g.p;
        Tensor<T> o(p.batch, p.heads, p.n_q, p.d_v), lse(p.batch, p.heads, p.n_q, 1);
        NullCounter counter;
        dense::forward(
            ForwardArgs<T>{p, g.q.cview(), g.k.cview(), g.v.cview(), o.view(), lse.view()},
            c.tiling,
            kMemory,
            counter);
        const auto oracle = oracle_forward<Oracle<T>>(p, g.q, g.k, g.v, causal_mask(p));
        const ForwardRun<T> run = run_forward(g, c, small_pieces());
        const Sharding qs(c.layout, p.n_q, world_size());
        const Sharding ks(c.layout, p.n_k, world_size());
        const auto oo = oracle.o.shard(qs, r), ol = oracle.lse.shard(qs, r);
        const ErrorCheck eo = agrees(run.o, o.shard(qs, r), oo, oo);
        const ErrorCheck el = agrees(run.lse, lse.shard(qs, r), ol, ol);
        INFO("O err " << static_cast<double>(eo.kernel_error) << " allowed "
                      << static_cast<double>(eo.allowed));
        INFO("L err " << static_cast<double>(el.kernel_error) << " allowed "
                      << static_cast<double>(el.allowed));
        CHECK(eo.passed());
        CHECK(el.passed());
        CHECK(run.stats.comm == comm_cost_ring_forward(p, ks, r, wire_bytes_of<T>()));
        CHECK(all_ranks(eo.passed() && el.passed()));
    }
}

TEMPLATE_TEST_CASE("ring_backward agrees with the single-process kernel", "[ring]", float, double) {
    using T = TestType;
    const int r = world_rank();
    for (const RingCase& c : ring_cases()) {
        CAPTURE(c.name, world_size(), r);
        const Global<T> g(c.p, 77, causal_mask(c.p));
        const Problem& p = g.p;
        Tensor<T> o = g.o, lse = g.lse;
        Tensor<T> dq(p.batch, p.heads, p.n_q, p.d);
        Tensor<T> dk(p.batch, p.kv_heads, p.n_k, p.d), dv(p.batch, p.kv_heads, p.n_k, p.d_v);
        BackwardArgs<T> b;
        static_cast<ForwardArgs<T>&>(b) = {
            p, g.q.cview(), g.k.cview(), g.v.cview(), o.view(), lse.view()};
        b.d_o = g.d_o.cview();
        b.d_q = dq.view();
        b.d_k = dk.view();
        b.d_v = dv.view();
        NullCounter counter;
        dense::backward(b, c.tiling, kMemory, counter);
        const auto mask = causal_mask(p);
        const auto oracle = oracle_backward<Oracle<T>>(p, g.q, g.k, g.v, g.o, g.lse, g.d_o, mask);
        const auto noise =
            oracle_backward<Oracle<T>>(p, g.q, g.k, g.v, g.o, g.lse, g.d_o, mask, true);
        const BackwardRun<T> run = run_backward(g, c, small_pieces());
        const Sharding qs(c.layout, p.n_q, world_size());
        const Sharding ks(c.layout, p.n_k, world_size());
        const ErrorCheck eq =
            agrees(run.dq, dq.shard(qs, r), oracle.dq.shard(qs, r), noise.dq.shard(qs, r));
        const ErrorCheck ek =
            agrees(run.dk, dk.shard(ks, r), oracle.dk.shard(ks, r), noise.dk.shard(ks, r));
        const ErrorCheck ev =
            agrees(run.dv, dv.shard(ks, r), oracle.dv.shard(ks, r), noise.dv.shard(ks, r));
        INFO("dQ err " << static_cast<double>(eq.kernel_error) << " allowed "
                       << static_cast<double>(eq.allowed));
        INFO("dK err " << static_cast<double>(ek.kernel_error) << " allowed "
                       << static_cast<double>(ek.allowed));
        INFO("dV err " << static_cast<double>(ev.kernel_error) << " allowed "
                       << static_cast<double>(ev.allowed));
        CHECK(eq.passed());
        CHECK(ek.passed());
        CHECK(ev.passed());
        CHECK(run.stats.comm == comm_cost_ring_backward(p, ks, r, wire_bytes_of<T>()));
        CHECK(all_ranks(eq.passed() && ek.passed() && ev.passed()));
    }
}

TEMPLATE_TEST_CASE("ring passes are bitwise deterministic across reruns, thread counts and "
                   "progress modes",
                   "[ring]",
                   float,
                   double) {
    using T = TestType;
    for (const RingCase& c : ring_cases()) {
        CAPTURE(c.name, world_size(), world_rank());
        const Global<T> g(c.p, 5, causal_mask(c.p));
        const auto f1 = run_forward(g, c, small_pieces());
        const auto f2 = run_forward(g, c, small_pieces());
        const auto f3 = run_forward(g, c, small_pieces(), 1);
        const auto f4 = run_forward(g, c, small_pieces(false)); // the caller computes and polls
        CHECK(bitwise(f1.o, f4.o));
        CHECK(bitwise(f1.lse, f4.lse));
        CHECK(bitwise(f1.o, f2.o));
        CHECK(bitwise(f1.lse, f2.lse));
        CHECK(bitwise(f1.o, f3.o));
        CHECK(bitwise(f1.lse, f3.lse));
        const auto b1 = run_backward(g, c, PassOptions{});
        const auto b2 = run_backward(g, c, PassOptions{});
        const auto b3 = run_backward(g, c, PassOptions{}, 1);
        const auto b4 = run_backward(g, c, small_pieces(false));
        const auto b5 = run_backward(g, c, small_pieces(true));
        CHECK(bitwise(b4.dq, b5.dq));
        CHECK(bitwise(b4.dk, b5.dk));
        CHECK(bitwise(b4.dv, b5.dv));
        CHECK(bitwise(b1.dq, b2.dq));
        CHECK(bitwise(b1.dk, b2.dk));
        CHECK(bitwise(b1.dv, b2.dv));
        CHECK(bitwise(b1.dq, b3.dq));
        CHECK(bitwise(b1.dk, b3.dk));
        CHECK(bitwise(b1.dv, b3.dv));
        CHECK(all_ranks(bitwise(f1.o, f3.o) && bitwise(b1.dk, b3.dk) && bitwise(b1.dq, b3.dq)));
    }
}

TEST_CASE("a causal mask's hidden steps make no kernel call", "[ring]") {
    const int ranks = world_size();
    const int r = world_rank();
    PassOptions whole; // one piece per block pair
    whole.poll_flops = 1e30;
    for (const Layout layout : {Layout::contiguous, Layout::zigzag}) {
        const RingCase c{
            "causal", shape(1, 2, 0, 48, 48, 8, 0, true), layout, {Schedule::fused, 8, 8}};
        const Global<float> g(c.p, 3, causal_mask(c.p));
        const auto f = run_forward(g, c, whole);
        const auto b = run_backward(g, c, whole);
        CAPTURE(to_string(layout), ranks, r);
        // contiguous: blocks of ranks below r are fully visible, r's own is one causal call, the
        // rest are hidden; zigzag: 3 calls on the own block, 2 on every other (half the work)
        const std::int64_t expected = layout == Layout::contiguous ? r + 1 : 3 + 2 * (ranks - 1);
        CHECK(f.stats.kernel_calls == expected);
        CHECK(b.stats.kernel_calls == expected);
    }
}

TEST_CASE("communication_only walks the same messages without kernels", "[ring]") {
    const int r = world_rank();
    PassOptions comm_only;
    comm_only.communication_only = true;
    for (const RingCase& c : ring_cases()) {
        CAPTURE(c.name);
        const Global<float> g(c.p, 9, causal_mask(c.p));
        const Sharding ks(c.layout, g.p.n_k, world_size());
        const auto f = run_forward(g, c, comm_only);
        const auto b = run_backward(g, c, comm_only);
        CHECK(f.stats.kernel_calls == 0);
        CHECK(b.stats.kernel_calls == 0);
        CHECK(f.stats.comm == comm_cost_ring_forward(g.p, ks, r, wire_bytes_of<float>()));
        CHECK(b.stats.comm == comm_cost_ring_backward(g.p, ks, r, wire_bytes_of<float>()));
    }
}
