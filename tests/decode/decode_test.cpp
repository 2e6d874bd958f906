// ioattn::decode against ioattn::attention on the same data: contiguous and paged caches, GQA
// and MQA, n_new 1 and 16, ragged lengths (0, n_new, chunk edges, capacity), fp32, double and
// bf16 caches; the paged layout and the bf16 cache bitwise equal to the contiguous fp32 one;
// thread-count determinism; counted == closed form == dry run; every documented throw.

#include "decode_case.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/error.hpp>
#include <ioattn/parallel.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using ioattn::test::DecodeCase;

/// Checks every sequence of `c` (decoded into c.o, c.lse) against its oracle: |O - O*| and
/// |L - L*| within tol (L = -inf exactly for empty sequences).
template <typename Scalar, typename Cache>
void check_against_attention(const DecodeCase<Scalar, Cache>& c, double tol) {
    for (std::int64_t s = 0; s < c.batch; ++s) {
        CAPTURE(s, c.lens[static_cast<std::size_t>(s)]);
        const auto [oo, ll] = c.oracle(s);
        double worst = 0;
        for (std::size_t e = 0; e < oo.size(); ++e) {
            const Scalar got = c.o[static_cast<std::size_t>(s) * oo.size() + e];
            REQUIRE(std::isfinite(static_cast<double>(got)));
            worst =
                std::max(worst, std::abs(static_cast<double>(got) - static_cast<double>(oo[e])));
        }
        CHECK(worst <= tol);
        for (std::size_t e = 0; e < ll.size(); ++e) {
            const Scalar got = c.lse[static_cast<std::size_t>(s) * ll.size() + e];
            if (std::isinf(static_cast<double>(ll[e])))
                CHECK(got == ll[e]);
            else
                CHECK(std::abs(static_cast<double>(got) - static_cast<double>(ll[e])) <= tol);
        }
    }
}

template <typename T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

constexpr double kDecodeTolFloat = 2e-5;

} // namespace

TEST_CASE("decode matches attention: contiguous fp32 cache, GQA, ragged lengths", "[decode]") {
    struct Shape {
        std::int64_t heads, kv_heads, n_new, d, d_v, chunk;
    };

    const Shape shapes[] = {{8, 2, 1, 64, 64, 0},
                            {8, 2, 16, 64, 64, 64},
                            {4, 1, 3, 5, 7, 16},
                            {6, 6, 2, 33, 17, 32},
                            {32, 8, 1, 128, 128, 0}};
    std::uint64_t seed = 1;
    for (const Shape& sh : shapes) {
        const std::int64_t cap = 700;
        std::vector<std::int64_t> lens = {0, sh.n_new, 511, 512, 513, cap};
        CAPTURE(sh.heads, sh.kv_heads, sh.n_new, sh.d, sh.d_v, sh.chunk);
        DecodeCase<float> c(6, sh.heads, sh.kv_heads, sh.n_new, sh.d, sh.d_v, cap, lens, seed++);
        ioattn::DecodeOptions opts;
        opts.chunk = sh.chunk;
        const auto report = ioattn::decode(c.args(), opts);
        CHECK(report.plan.chunk == (sh.chunk == 0 ? ioattn::kDecodeChunk : sh.chunk));
        check_against_attention(c, kDecodeTolFloat);
    }
}

TEST_CASE("decode in double matches attention in double", "[decode]") {
    DecodeCase<double> c(3, 4, 2, 4, 24, 24, 300, {4, 0, 300}, 11);
    ioattn::DecodeOptions opts;
    opts.chunk = 48;
    ioattn::decode(c.args(), opts);
    check_against_attention(c, 1e-12);
}

TEST_CASE("decode over a paged cache equals the contiguous cache bitwise", "[decode]") {
    for (const std::int64_t bs : {16, 5, 128}) {
        CAPTURE(bs);
        DecodeCase<float> c(4, 8, 2, 3, 40, 40, 530, {530, 0, 3, 257}, 21);
        ioattn::DecodeOptions opts;
        opts.chunk = 128;
        ioattn::decode(c.args(), opts);
        const auto o_contiguous = c.o, l_contiguous = c.lse;
        c.build_paged(bs, 5);
        std::fill(c.o.begin(), c.o.end(), 3.0F);
        ioattn::decode(c.args(true), opts);
        CHECK(bitwise_equal(c.o, o_contiguous));
        CHECK(bitwise_equal(c.lse, l_contiguous));
        check_against_attention(c, kDecodeTolFloat);
    }
}

TEST_CASE("decode over a bf16 cache equals fp32 of the same rounded values", "[decode][bf16]") {
    DecodeCase<float, ioattn::bf16> h(3, 8, 2, 2, 64, 64, 600, {600, 2, 129}, 31);
    DecodeCase<float> f = ioattn::test::widened(h);
    ioattn::decode(h.args());
    ioattn::decode(f.args());
    CHECK(bitwise_equal(h.o, f.o));
    CHECK(bitwise_equal(h.lse, f.lse));
    check_against_attention(h, kDecodeTolFloat);
    h.build_paged(16, 3);
    std::fill(h.o.begin(), h.o.end(), 0.0F);
    ioattn::decode(h.args(true));
    CHECK(bitwise_equal(h.o, f.o));
}

TEST_CASE("bf16 rounds to nearest even and widens exactly", "[decode][bf16]") {
    using ioattn::bf16;
    CHECK(bf16(1.0F).bits == 0x3F80);
    CHECK(bf16(1.0F + 0x1p-8F).bits == 0x3F80);            // a tie: to even
    CHECK(bf16(1.0F + 0x1p-7F + 0x1p-8F).bits == 0x3F82);  // a tie: to even (up)
    CHECK(bf16(1.0F + 0x1p-8F + 0x1p-20F).bits == 0x3F81); // above the tie
    CHECK(static_cast<float>(bf16::from_bits(0xC040)) == -3.0F);
    CHECK(std::isnan(static_cast<float>(bf16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isinf(static_cast<float>(bf16(std::numeric_limits<float>::max()))));
    std::vector<float> in = {0.1F, -2.5F, 1e-30F, 3e38F}, out(4);
    std::vector<bf16> mid(4);
    ioattn::narrow(in.data(), mid.data(), 4);
    ioattn::widen(mid.data(), out.data(), 4);
    for (std::size_t e = 0; e < 4; ++e)
        CHECK(out[e] == ioattn::round_to_bf16(in[e]));
    CHECK(out[1] == -2.5F);
}

TEST_CASE("decode generation loop: a paged cache grown one step at a time", "[decode]") {
    // Each step appends the new tokens' K/V to the paged cache (blocks taken in a scrambled
    // order as a sequence grows) and decodes them; checked against causal attention over the
    // whole prefix, the new tokens last.
    const std::int64_t heads = 4, kv_heads = 2, d = 32, bs = 16, steps = 40, n_new = 3;
    const std::int64_t cap = steps * n_new, max_blocks = (cap + bs - 1) / bs;
    DecodeCase<float> full(1, heads, kv_heads, n_new, d, d, cap, {cap}, 41);
    std::vector<float> pk(static_cast<std::size_t>(max_blocks * kv_heads * bs * d));
    std::vector<float> pv(pk.size());
    std::vector<std::int64_t> table(static_cast<std::size_t>(max_blocks));
    for (std::int64_t j = 0; j < max_blocks; ++j)
        table[static_cast<std::size_t>(j)] = (j * 5 + 3) % max_blocks; // 5 is prime to 8
    ioattn::Problem p;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.n_q = n_new;
    p.d = d;
    p.causal = true;
    for (std::int64_t step = 1; step <= steps; ++step) {
        const std::int64_t len = step * n_new;
        CAPTURE(step);
        for (std::int64_t pos = len - n_new; pos < len; ++pos) // append this step's K and V
            for (std::int64_t g = 0; g < kv_heads; ++g) {
                const std::int64_t blk = table[static_cast<std::size_t>(pos / bs)];
                const auto dst =
                    static_cast<std::size_t>(((blk * kv_heads + g) * bs + pos % bs) * d);
                for (std::int64_t x = 0; x < d; ++x) {
                    pk[dst + static_cast<std::size_t>(x)] = full.k[full.idx(0, g, pos, x, d)];
                    pv[dst + static_cast<std::size_t>(x)] = full.v[full.idx(0, g, pos, x, d)];
                }
            }
        ioattn::test::Rng rng(static_cast<std::uint64_t>(step));
        std::vector<float> q(static_cast<std::size_t>(heads * n_new * d));
        rng.fill(q);
        std::vector<float> o(static_cast<std::size_t>(heads * n_new * d)),
            l(static_cast<std::size_t>(heads * n_new));
        ioattn::DecodeArgs<float> a;
        a.q = ioattn::TensorView<const float>::packed(q.data(), 1, heads, n_new, d);
        a.k = ioattn::TensorView<const float>::packed(pk.data(), max_blocks, kv_heads, bs, d);
        a.v = ioattn::TensorView<const float>::packed(pv.data(), max_blocks, kv_heads, bs, d);
        a.kv_lens = &len;
        a.block_table = {table.data(), 1, max_blocks, max_blocks};
        a.o = ioattn::TensorView<float>::packed(o.data(), 1, heads, n_new, d);
        a.lse = ioattn::TensorView<float>::packed(l.data(), 1, heads, n_new, 1);
        ioattn::DecodeOptions opts;
        opts.chunk = 32;
        ioattn::decode(a, opts);
        // the oracle: the prefix of the full cache, read with the capacity as row stride
        p.n_k = len;
        std::vector<float> oo(o.size()), ll(l.size());
        ioattn::ForwardArgs<float> f = ioattn::ForwardArgs<float>::packed(
            p, q.data(), full.k.data(), full.v.data(), oo.data(), ll.data());
        f.k.stride_batch = f.v.stride_batch = kv_heads * cap * d;
        f.k.stride_head = f.v.stride_head = cap * d;
        f.k.extent = f.v.extent = static_cast<std::int64_t>(full.k.size());
        ioattn::AttentionOptions ao;
        ao.schedule = ioattn::Schedule::fused;
        ioattn::attention(f, {}, ao);
        double worst = 0;
        for (std::size_t e = 0; e < o.size(); ++e)
            worst = std::max(worst, static_cast<double>(std::abs(o[e] - oo[e])));
        for (std::size_t e = 0; e < l.size(); ++e)
            worst = std::max(worst, static_cast<double>(std::abs(l[e] - ll[e])));
        CHECK(worst <= kDecodeTolFloat);
    }
}

TEST_CASE("decode is bitwise independent of the thread count", "[decode]") {
    DecodeCase<float> c(3, 8, 2, 2, 64, 64, 2000, {2000, 700, 2}, 51);
    ioattn::DecodeOptions opts;
    opts.chunk = 64;
    std::vector<std::vector<float>> outs;
    for (const int threads : {1, 2, 3, 7}) {
        opts.threads = threads;
        std::fill(c.o.begin(), c.o.end(), 0.0F);
        ioattn::decode(c.args(), opts);
        outs.push_back(c.o);
        outs.push_back(c.lse);
    }
    for (std::size_t i = 2; i < outs.size(); ++i)
        CHECK(bitwise_equal(outs[i], outs[i % 2]));
}

TEST_CASE("decode: counted I/O equals the closed form and the dry run", "[decode][io]") {
    for (const std::int64_t chunk : {16, 64, 512}) {
        CAPTURE(chunk);
        DecodeCase<float> c(4, 8, 2, 4, 48, 40, 300, {300, 0, 4, 65}, 61);
        ioattn::DecodeOptions opts;
        opts.chunk = chunk;
        opts.count_io = true;
        const auto counted = ioattn::decode(c.args(), opts);
        REQUIRE(counted.io.has_value());
        CHECK(*counted.io == *counted.closed_form);
        opts.count_io = false;
        opts.dry_run = true;
        const auto dry = ioattn::decode(c.args(), opts);
        CHECK(*dry.io == *counted.io);
        // the closed form by hand for the 65-row sequence: R = 16, c = ceil(65 / chunk)
        const ioattn::IoReport lower = ioattn::decode_lower_bound(counted.plan);
        CHECK(lower.reads == 2 * ((300 + 4 + 65) * (48 + 40) + 3 * 16 * 48));
        CHECK(lower.writes == 2 * 4 * 16 * 41);
        CHECK(counted.io->reads >= lower.reads);
        if (chunk == 512) // one chunk per sequence: exactly the compulsory traffic
            CHECK(counted.io->reads == lower.reads);
        CHECK(counted.io->writes >= lower.writes);
    }
}

TEST_CASE("decode's default chunk grows with the longest sequence it reads", "[decode]") {
    CHECK(ioattn::default_decode_chunk(0) == 512);
    CHECK(ioattn::default_decode_chunk(8192) == 512);
    CHECK(ioattn::default_decode_chunk(8193) == 1024);
    CHECK(ioattn::default_decode_chunk(16385) == 2048);
    CHECK(ioattn::default_decode_chunk(1 << 20) == 2048);
    ioattn::DecodeShape s;
    s.batch = 3;
    s.heads = 4;
    s.kv_heads = 2;
    s.d = 8;
    s.kv_lens = {100, 65536, 0};
    const ioattn::DecodePlan long_cache = ioattn::plan_decode(s);
    CHECK(long_cache.chunk == 2048);
    CHECK(long_cache.chunks(1) == 32);
    CHECK(long_cache.chunks(0) == 1);
    s.window = 4096; // the rows read, not the length: 4096 visible rows
    CHECK(ioattn::plan_decode(s).chunk == 512);
    ioattn::DecodeOptions set;
    set.chunk = 48; // a chunk the caller sets is kept
    CHECK(ioattn::plan_decode(s, set).chunk == 48);
}

TEST_CASE("decode: a masked cached row never reaches a token", "[decode]") {
    // n_new = 4: the last cached row is seen only by the last token; NaN there leaves the
    // others finite and equal to the oracle without that row.
    DecodeCase<float> c(1, 2, 1, 4, 16, 16, 40, {40}, 71);
    ioattn::decode(c.args());
    const auto clean = c.o;
    for (std::int64_t x = 0; x < 16; ++x) {
        c.k[c.idx(0, 0, 39, x, 16)] = std::numeric_limits<float>::quiet_NaN();
        c.v[c.idx(0, 0, 39, x, 16)] = std::numeric_limits<float>::infinity();
    }
    ioattn::decode(c.args());
    for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t t = 0; t < 4; ++t)
            for (std::int64_t x = 0; x < 16; ++x) {
                const auto e = static_cast<std::size_t>((h * 4 + t) * 16 + x);
                if (t < 3)
                    CHECK(c.o[e] == clean[e]);
                else
                    CHECK(std::isnan(c.o[e]));
            }
}

namespace {

template <typename F>
std::string decode_error(F&& f) {
    try {
        f();
    } catch (const ioattn::InvalidArgument& e) {
        return e.what();
    }
    return "no throw";
}

} // namespace

TEST_CASE("decode: bad input throws InvalidArgument naming the values", "[decode][throws]") {
    DecodeCase<float> c(2, 8, 2, 2, 16, 16, 64, {64, 10}, 81);
    c.build_paged(16, 1);
    const auto contains = [](const std::string& s, const std::string& part) {
        INFO(s);
        return s.find(part) != std::string::npos;
    };
    // a length above the capacity
    c.lens[1] = 65;
    CHECK(contains(decode_error([&] { ioattn::decode(c.args()); }), "kv_lens[1] = 65"));
    // a table too short for the length
    CHECK(contains(decode_error([&] { ioattn::decode(c.args(true)); }), "needs 5 blocks"));
    c.lens[1] = 10;
    // a block index out of range
    c.table[1] = c.num_blocks;
    CHECK(contains(decode_error([&] { ioattn::decode(c.args(true)); }), "block_table[0][1]"));
    c.table[1] = -1;
    CHECK(contains(decode_error([&] { ioattn::decode(c.args(true)); }), "= -1 is outside"));
    c.build_paged(16, 1);
    // n_new above the length
    c.lens[1] = 1;
    CHECK(contains(decode_error([&] { ioattn::decode(c.args()); }), "less than n_new = 2"));
    c.lens[1] = -3;
    CHECK(contains(decode_error([&] { ioattn::decode(c.args()); }), "kv_lens[1] = -3"));
    c.lens[1] = 10;
    // heads not a multiple of kv_heads
    {
        auto a = c.args();
        a.q.heads = 7;
        CHECK(contains(decode_error([&] { ioattn::decode(a); }), "heads = 7 is not a multiple"));
    }
    // shapes and strides
    {
        auto a = c.args();
        a.o.cols = 8;
        CHECK(contains(decode_error([&] { ioattn::decode(a); }), "o has shape"));
    }
    {
        auto a = c.args();
        a.k.stride_row = 8;
        CHECK(contains(decode_error([&] { ioattn::decode(a); }), "k_cache strides"));
    }
    {
        auto a = c.args();
        a.v.extent -= 1;
        CHECK(contains(decode_error([&] { ioattn::decode(a); }), "v_cache addresses"));
    }
    {
        auto a = c.args();
        a.kv_lens = nullptr;
        CHECK(contains(decode_error([&] { ioattn::decode(a); }), "kv_lens is null"));
    }
    {
        auto a = c.args();
        a.o.data = c.q.data();
        a.o.extent = static_cast<std::int64_t>(c.q.size());
        CHECK(contains(decode_error([&] { ioattn::decode(a); }), "overlaps q"));
    }
    {
        auto a = c.args();
        a.scale = -1.0;
        CHECK(contains(decode_error([&] { ioattn::decode(a); }), "scale = -1"));
    }
    {
        ioattn::DecodeOptions opts;
        opts.chunk = 20;
        CHECK(contains(decode_error([&] { ioattn::decode(c.args(), opts); }), "chunk = 20"));
    }
    {
        ioattn::DecodeShape s;
        s.n_new = 17;
        s.d = 8;
        s.kv_lens = {20};
        CHECK(contains(decode_error([&] { ioattn::plan_decode(s); }), "n_new = 17"));
    }
}

TEST_CASE("decode of empty sequences gives O = 0 and L = -inf", "[decode]") {
    DecodeCase<float> c(2, 4, 4, 1, 8, 8, 16, {0, 0}, 91);
    const auto report = ioattn::decode(c.args());
    CHECK(report.plan.tasks() == 0);
    for (const float x : c.o)
        CHECK(x == 0.0F);
    for (const float x : c.lse)
        CHECK(x == -std::numeric_limits<float>::infinity());
}

TEST_CASE("decode_reference: an empty sequence, and a sequence outside the batch", "[decode]") {
    ioattn::DecodeShape s;
    s.batch = 2;
    s.heads = 2;
    s.kv_heads = 1;
    s.d = 4;
    s.kv_lens = {0, 3};
    const std::vector<double> q(8, 0.5), kv(12, 0.25);
    const auto [o, l] = ioattn::decode_reference<double>(s, 0, q.data(), kv.data(), kv.data());
    REQUIRE(o.size() == 8);
    for (const double x : o)
        CHECK(x == 0.0);
    for (const double x : l)
        CHECK(x == -std::numeric_limits<double>::infinity());
    // three equal rows: O is the row, L = log 3 + the score
    const auto [o1, l1] = ioattn::decode_reference<double>(s, 1, q.data(), kv.data(), kv.data());
    CHECK(o1[0] == Approx(0.25));
    CHECK(l1[0] == Approx(std::log(3.0) + 4 * 0.5 * 0.25 / 2.0));
    const std::string error = decode_error(
        [&] { ioattn::decode_reference<double>(s, 2, q.data(), kv.data(), kv.data()); });
    CHECK(error.find("sequence 2 of 2") != std::string::npos);
}
