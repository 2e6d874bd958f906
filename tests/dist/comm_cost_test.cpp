// Tests of the communication closed forms (no messages): the ring forms for n divisible
// by P, the lower bounds of contiguous and zigzag causal shards, the sparse forms against a
// brute-force count over (query row, key) pairs, and the bytes of each dtype (bf16: 2 bytes per
// K/V word and finished dK, dV word, 4 per partial-sum word).

#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <set>
#include <utility>

using namespace ioattn;
using namespace ioattn::dist;

namespace {

Problem problem(std::int64_t n, std::int64_t heads, std::int64_t kv_heads, bool causal) {
    Problem p;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.n_q = n;
    p.n_k = n;
    p.d = 16;
    p.causal = causal;
    return p.resolved();
}

} // namespace

TEST_CASE("ring forward receives 2(P-1)(n/P) H_kv d words, the backward about twice", "[cost]") {
    for (int ranks = 1; ranks <= 8; ++ranks) {
        const std::int64_t n = 24 * ranks;
        const Problem p = problem(n, 8, 2, false); // GQA: K/V heads only
        const Sharding s(Layout::contiguous, n, ranks);
        for (int r = 0; r < ranks; ++r) {
            const CommReport f = comm_cost_ring_forward(p, s, r, WireBytes{});
            const std::int64_t expected = 2 * (ranks - 1) * (n / ranks) * 2 * 16;
            CHECK(f.received_words == expected);
            CHECK(f.sent_words == expected);
            CHECK(f.received_messages == ranks - 1);
            const CommReport b = comm_cost_ring_backward(p, s, r, WireBytes{});
            CHECK(b.received_words == (ranks == 1 ? 0 : expected + n * 64)); // W = 2 (16 + 16)
            CHECK(b.received_messages == (ranks == 1 ? 0 : 2 * ranks - 1));
            // dense: the ring forward receives exactly the lower bound
            CHECK(comm_lower_bound(p, s, s, r) == f.received_words);
        }
    }
}

TEST_CASE("causal lower bounds of contiguous and zigzag shards", "[cost]") {
    const int ranks = 4;
    const std::int64_t c = 5; // rows per chunk
    const Problem p = problem(2 * ranks * c, 1, 1, true);
    const std::int64_t w = kv_row_words(p);
    const Sharding contiguous(Layout::contiguous, p.n_k, ranks);
    const Sharding zigzag(Layout::zigzag, p.n_k, ranks);
    for (int r = 0; r < ranks; ++r) {
        // contiguous: all rows before the rank's chunk (of 2c rows)
        CHECK(comm_lower_bound(p, contiguous, contiguous, r) == r * 2 * c * w);
        // zigzag: chunks 0 .. 2P-2-r except chunk r: 2P-2-r chunks of c rows
        CHECK(comm_lower_bound(p, zigzag, zigzag, r) == (2 * ranks - 2 - r) * c * w);
    }
}

TEST_CASE("sparse closed forms equal a brute-force count of needed rows", "[cost]") {
    const std::int64_t n = 41;
    const Problem p = problem(n, 2, 1, false);
    for (const char* spec : {"window:3", "bigbird:2:1:2", "causal", "block:4:0.3"}) {
        const sparse::Support s = sparse::parse_pattern(spec, n, n, 5);
        for (int ranks = 1; ranks <= 4; ++ranks)
            for (const Layout layout : {Layout::contiguous, Layout::zigzag}) {
                CAPTURE(spec, ranks, to_string(layout));
                const Sharding sh(layout, n, ranks);
                for (int r = 0; r < ranks; ++r) {
                    std::set<std::int64_t> in;                  // keys r receives
                    std::set<std::pair<int, std::int64_t>> out; // (rank, key) r sends
                    for (std::int64_t i = 0; i < n; ++i)
                        for (std::int64_t j = 0; j < n; ++j) {
                            if (!s.contains(i, j) || sh.owner(i) == sh.owner(j))
                                continue;
                            if (sh.owner(i) == r)
                                in.insert(j);
                            if (sh.owner(j) == r)
                                out.insert({sh.owner(i), j});
                        }
                    const auto w = kv_row_words(p);
                    const CommReport f = comm_cost_sparse_forward(p, s, sh, sh, r, WireBytes{});
                    CHECK(f.received_words == static_cast<std::int64_t>(in.size()) * w);
                    CHECK(f.sent_words == static_cast<std::int64_t>(out.size()) * w);
                    CHECK(comm_lower_bound(p, s, sh, sh, r) == f.received_words);
                    const CommReport b = comm_cost_sparse_backward(p, s, sh, sh, r, WireBytes{});
                    CHECK(b.received_words == f.received_words + f.sent_words);
                }
            }
    }
}

TEST_CASE("closed-form bytes weigh each word at the size it travels in", "[cost]") {
    CHECK(wire_bytes_of<float>() == WireBytes{4, 4});
    CHECK(wire_bytes_of<double>() == WireBytes{8, 8});
    CHECK(wire_bytes_of<bf16>() == WireBytes{2, 4});
    const WireBytes half = wire_bytes_of<bf16>();
    for (int ranks = 1; ranks <= 5; ++ranks) {
        const std::int64_t n = 12 * ranks;
        const std::int64_t rows = n / ranks;
        const Problem p = problem(n, 4, 2, true);
        const std::int64_t w = kv_row_words(p);
        for (const Layout layout : {Layout::contiguous, Layout::zigzag}) {
            const Sharding s(layout, n, ranks);
            for (int r = 0; r < ranks; ++r) {
                CAPTURE(ranks, r, to_string(layout));
                const CommReport f = comm_cost_ring_forward(p, s, r, half);
                const CommReport f32 = comm_cost_ring_forward(p, s, r, wire_bytes_of<float>());
                const CommReport f64 = comm_cost_ring_forward(p, s, r, wire_bytes_of<double>());
                // the words do not depend on the dtype; the forward's bytes are 2, 4, 8 per word
                CHECK(f.sent_words == f32.sent_words);
                CHECK(f.sent_bytes == 2 * f.sent_words);
                CHECK(f.received_bytes == 2 * f.received_words);
                CHECK(f32.received_bytes == 4 * f.received_words);
                CHECK(f64.received_bytes == 8 * f.received_words);
                // backward: the rotation and the last hop home in bf16, the P - 1 partial hops
                // in fp32: 2 (P - 1) rows W + 2 rows W + 4 (P - 1) rows W each way
                const CommReport b = comm_cost_ring_backward(p, s, r, half);
                const CommReport b32 = comm_cost_ring_backward(p, s, r, wire_bytes_of<float>());
                CHECK(b.received_words == b32.received_words);
                CHECK(b32.sent_bytes == 4 * b32.sent_words);
                const std::int64_t expected =
                    ranks == 1 ? 0 : (2 * (ranks - 1) + 2 + 4 * (ranks - 1)) * rows * w;
                CHECK(b.sent_bytes == expected);
                CHECK(b.received_bytes == expected);
            }
        }
    }
    const std::int64_t n = 41;
    const Problem p = problem(n, 2, 1, false);
    const sparse::Support s = sparse::parse_pattern("bigbird:2:1:2", n, n, 5);
    for (int ranks = 1; ranks <= 4; ++ranks) {
        const Sharding sh(Layout::zigzag, n, ranks);
        for (int r = 0; r < ranks; ++r) {
            CAPTURE(ranks, r);
            const CommReport f = comm_cost_sparse_forward(p, s, sh, sh, r, half);
            CHECK(f.sent_bytes == 2 * f.sent_words);
            CHECK(f.received_bytes == 2 * f.received_words);
            // backward: K/V rows out and in at 2 bytes, the dK, dV partials back at 4
            const CommReport b = comm_cost_sparse_backward(p, s, sh, sh, r, half);
            CHECK(b.sent_bytes == 2 * f.sent_words + 4 * f.received_words);
            CHECK(b.received_bytes == 2 * f.received_words + 4 * f.sent_words);
        }
    }
}
