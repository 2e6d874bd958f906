// Tests of ioattn::dist::sparse_forward / sparse_backward and ExchangePlan under mpirun:
// window, causal-window, bigbird, global and causal patterns over contiguous and zigzag shards,
// GQA, n not divisible by P, float and double: each rank's rows against the single-process
// sparse kernels, counted words == comm_cost_sparse_*, the forward at the lower bound exactly,
// window:W exchanging with neighbours only, and bitwise reruns.

#include "dist_case.hpp"

#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/dist/sparse_exchange.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ioattn;
using namespace ioattn::dist;
using namespace ioattn::dist::test;

namespace {

struct SparseCase {
    std::string spec;
    Problem p;
    Layout layout;
};

Problem shape(std::int64_t b, std::int64_t h, std::int64_t g, std::int64_t n, std::int64_t d) {
    Problem p;
    p.batch = b;
    p.heads = h;
    p.kv_heads = g;
    p.n_q = n;
    p.n_k = n;
    p.d = d;
    return p.resolved();
}

std::vector<SparseCase> sparse_cases() {
    return {
        {"window:3", shape(1, 2, 0, 37, 8), Layout::contiguous},
        {"causal-window:4", shape(2, 2, 1, 41, 8), Layout::contiguous},
        {"bigbird:2:1:2", shape(1, 4, 2, 43, 4), Layout::zigzag},
        {"window:2+global:1", shape(1, 1, 0, 38, 8), Layout::contiguous},
        {"causal", shape(1, 2, 0, 35, 8), Layout::zigzag},
    };
}

Allowed mask_of(const sparse::Support& s) {
    return [&s](std::int64_t i, std::int64_t j) { return s.contains(i, j); };
}

template <typename T>
struct Run {
    Tensor<T> o, lse, dq, dk, dv;
    PassStats forward, backward;
};

/// This rank's sparse_forward and sparse_backward (from the oracle's O, L) of the case.
template <typename T>
Run<T>
run_dist(const Global<T>& g, const SparseCase& c, const sparse::Support& s, int threads = 0) {
    const Problem& p = g.p;
    const Sharding qs(c.layout, p.n_q, world_size());
    const Sharding ks(c.layout, p.n_k, world_size());
    const int r = world_rank();
    const Tensor<T> q = g.q.shard(qs, r), k = g.k.shard(ks, r), v = g.v.shard(ks, r);
    const Tensor<T> d_o = g.d_o.shard(qs, r);
    Tensor<T> o0 = g.o.shard(qs, r), lse0 = g.lse.shard(qs, r);
    Run<T> run{Tensor<T>(p.batch, p.heads, qs.rows(r), p.d_v),
               Tensor<T>(p.batch, p.heads, qs.rows(r), 1),
               Tensor<T>(p.batch, p.heads, qs.rows(r), p.d),
               Tensor<T>(p.batch, p.kv_heads, ks.rows(r), p.d),
               Tensor<T>(p.batch, p.kv_heads, ks.rows(r), p.d_v),
               {},
               {}};
    const ShardForwardArgs<T> f{
        p, c.layout, q.cview(), k.cview(), v.cview(), run.o.view(), run.lse.view()};
    ShardBackwardArgs<T> b;
    static_cast<ShardForwardArgs<T>&>(b) = {
        p, c.layout, q.cview(), k.cview(), v.cview(), o0.view(), lse0.view()};
    b.d_o = d_o.cview();
    b.d_q = run.dq.view();
    b.d_k = run.dk.view();
    b.d_v = run.dv.view();
    NullCounter counter;
    const auto both = [&] {
        run.forward = sparse_forward(MPI_COMM_WORLD, f, s, kTiling, kMemory, counter);
        run.backward = sparse_backward(MPI_COMM_WORLD, b, s, kTiling, kMemory, counter);
    };
    with_parallelism(threads, both);
    return run;
}

} // namespace

TEMPLATE_TEST_CASE("sparse exchange agrees with the single-process sparse kernels",
                   "[sparse]",
                   float,
                   double) {
    using T = TestType;
    const int r = world_rank();
    for (const SparseCase& c : sparse_cases()) {
        CAPTURE(c.spec, to_string(c.layout), world_size(), r);
        const sparse::Support s = sparse::parse_pattern(c.spec, c.p.n_q, c.p.n_k, 11);
        const Global<T> g(c.p, 31, mask_of(s));
        const Problem& p = g.p;
        // the single-process kernels on the whole problem
        Tensor<T> o(p.batch, p.heads, p.n_q, p.d_v), lse(p.batch, p.heads, p.n_q, 1);
        Tensor<T> o0 = g.o, lse0 = g.lse;
        Tensor<T> dq(p.batch, p.heads, p.n_q, p.d);
        Tensor<T> dk(p.batch, p.kv_heads, p.n_k, p.d), dv(p.batch, p.kv_heads, p.n_k, p.d_v);
        NullCounter counter;
        sparse::forward(
            ForwardArgs<T>{p, g.q.cview(), g.k.cview(), g.v.cview(), o.view(), lse.view()},
            s,
            kTiling,
            kMemory,
            counter);
        BackwardArgs<T> b;
        static_cast<ForwardArgs<T>&>(b) = {
            p, g.q.cview(), g.k.cview(), g.v.cview(), o0.view(), lse0.view()};
        b.d_o = g.d_o.cview();
        b.d_q = dq.view();
        b.d_k = dk.view();
        b.d_v = dv.view();
        sparse::backward(b, s, kTiling, kMemory, counter);
        const auto fo = oracle_forward<Oracle<T>>(p, g.q, g.k, g.v, mask_of(s));
        const auto go = oracle_backward<Oracle<T>>(p, g.q, g.k, g.v, g.o, g.lse, g.d_o, mask_of(s));
        const auto gn =
            oracle_backward<Oracle<T>>(p, g.q, g.k, g.v, g.o, g.lse, g.d_o, mask_of(s), true);

        const Run<T> run = run_dist(g, c, s);
        const Sharding qs(c.layout, p.n_q, world_size());
        const Sharding ks(c.layout, p.n_k, world_size());
        const ErrorCheck e[] = {
            agrees(run.o, o.shard(qs, r), fo.o.shard(qs, r), fo.o.shard(qs, r)),
            agrees(run.lse, lse.shard(qs, r), fo.lse.shard(qs, r), fo.lse.shard(qs, r)),
            agrees(run.dq, dq.shard(qs, r), go.dq.shard(qs, r), gn.dq.shard(qs, r)),
            agrees(run.dk, dk.shard(ks, r), go.dk.shard(ks, r), gn.dk.shard(ks, r)),
            agrees(run.dv, dv.shard(ks, r), go.dv.shard(ks, r), gn.dv.shard(ks, r))};
        bool ok = true;
        for (const ErrorCheck& x : e) {
            INFO("err " << static_cast<double>(x.kernel_error) << " allowed "
                        << static_cast<double>(x.allowed));
            CHECK(x.passed());
            ok = ok && x.passed();
        }
        CHECK(run.forward.comm == comm_cost_sparse_forward(p, s, qs, ks, r, wire_bytes_of<T>()));
        CHECK(run.backward.comm == comm_cost_sparse_backward(p, s, qs, ks, r, wire_bytes_of<T>()));
        CHECK(run.forward.comm.received_words == comm_lower_bound(p, s, qs, ks, r));
        CHECK(all_ranks(ok));
    }
}

TEMPLATE_TEST_CASE("sparse exchange is bitwise deterministic", "[sparse]", float, double) {
    using T = TestType;
    for (const SparseCase& c : sparse_cases()) {
        CAPTURE(c.spec, world_size(), world_rank());
        const sparse::Support s = sparse::parse_pattern(c.spec, c.p.n_q, c.p.n_k, 11);
        const Global<T> g(c.p, 8, mask_of(s));
        const Run<T> a = run_dist(g, c, s);
        const Run<T> b = run_dist(g, c, s);
        const Run<T> one = run_dist(g, c, s, 1);
        for (const Run<T>* x : {&b, &one}) {
            CHECK(bitwise(a.o, x->o));
            CHECK(bitwise(a.lse, x->lse));
            CHECK(bitwise(a.dq, x->dq));
            CHECK(bitwise(a.dk, x->dk));
            CHECK(bitwise(a.dv, x->dv));
        }
    }
}

TEST_CASE("window:W exchanges rows with the neighbouring ranks only", "[sparse]") {
    const int ranks = world_size();
    const int r = world_rank();
    const std::int64_t n = 64, w = 3; // every chunk is longer than W
    const Sharding shards(Layout::contiguous, n, ranks);
    const sparse::Support s = sparse::pattern_window(n, n, w);
    const ExchangePlan plan = ExchangePlan::build(s, shards, shards, r);
    std::vector<int> expected;
    if (r > 0)
        expected.push_back(r - 1);
    if (r + 1 < ranks)
        expected.push_back(r + 1);
    CHECK(plan.peers() == expected);
    for (const int peer : expected) { // W rows each way across each boundary
        CHECK(plan.receive_rows[static_cast<std::size_t>(peer)].size() ==
              static_cast<std::size_t>(w));
        CHECK(plan.send_rows[static_cast<std::size_t>(peer)].size() == static_cast<std::size_t>(w));
    }
    // the local key set: own rows plus W on each side that has a neighbour
    CHECK(static_cast<std::int64_t>(plan.keys.size()) ==
          shards.rows(r) + w * static_cast<std::int64_t>(expected.size()));
    CHECK(plan.support.z_qk() > 0);
}
