// ioattn decode's run (decode_run.hpp): the operands of a decode problem built from seeded
// values (a paged cache's blocks in a seeded shuffled order, as an allocator leaves them), the
// timed calls (median, min, max), the read bandwidth measured in the same run, the counted I/O
// against the closed form and the lower bound, and the check of every sequence against
// ioattn::attention in double on the same values (the error-ratio rule of run --check, the
// working type's ioattn::attention as the naive peer).

#include "decode_run.hpp"

#include "commands.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/fp16.hpp>
#include <ioattn/isa.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

namespace {

constexpr const char* kDecodeRunWhere = "decode";

/// The operands of one decode problem, owned.
template <typename Scalar, typename Cache>
struct DecodeData {
    std::int64_t batch, heads, kv_heads, n_new, d, window, rows, block_size = 0, max_blocks = 0;
    std::string pattern; ///< DecodeArgs::pattern
    std::uint64_t pattern_seed;
    std::vector<std::int64_t> lens, table;
    std::vector<Scalar> q, o, lse;
    std::vector<Cache> k, v; ///< contiguous [B][G][rows][d] or paged [blocks][G][bs][d]

    DecodeData(const DecodeSetup& c, std::vector<std::int64_t> l)
        : batch(static_cast<std::int64_t>(l.size()))
        , heads(c.heads)
        , kv_heads(c.kv_heads)
        , n_new(c.new_tokens)
        , d(c.d)
        , window(c.window)
        , pattern(c.pattern)
        , pattern_seed(c.seed)
        , lens(std::move(l)) {
        const std::int64_t longest = std::max<std::int64_t>(
            1, lens.empty() ? 1 : *std::max_element(lens.begin(), lens.end()));
        std::int64_t slots = batch;
        if (c.page_size > 0) {
            block_size = c.page_size;
            max_blocks = (longest + block_size - 1) / block_size;
            std::int64_t blocks = 0;
            for (const std::int64_t len : lens)
                blocks += (std::max<std::int64_t>(len, 0) + block_size - 1) / block_size;
            std::vector<std::int64_t> perm(static_cast<std::size_t>(blocks));
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), std::mt19937_64(c.seed));
            table.assign(static_cast<std::size_t>(batch * max_blocks), 0);
            std::size_t next = 0;
            for (std::int64_t b = 0; b < batch; ++b)
                for (std::int64_t j = 0;
                     j * block_size < lens[static_cast<std::size_t>(b)] && j < max_blocks;
                     ++j)
                    table[static_cast<std::size_t>(b * max_blocks + j)] = perm[next++];
            slots = std::max<std::int64_t>(blocks, 1);
            rows = block_size;
        } else {
            rows = longest;
        }
        q.resize(static_cast<std::size_t>(batch * heads * n_new * d));
        o.resize(q.size());
        lse.resize(static_cast<std::size_t>(batch * heads * n_new));
        fill(q, c.seed);
        const auto cache_words = static_cast<std::size_t>(slots * kv_heads * rows * d);
        k = cache_of(cache_words, c.seed + 1);
        v = cache_of(cache_words, c.seed + 2);
    }

    /// Uniform queries; with a bf16 cache, bf16 values as a bf16 model's queries are (the
    /// products then run in bf16 where the CPU has AVX512_BF16: decode.cpp).
    static void fill(std::vector<Scalar>& x, std::uint64_t seed) {
        if constexpr (std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>)
            measure::fill_uniform(x, seed);
        if constexpr (std::is_same_v<Scalar, float> && std::is_same_v<Cache, bf16>)
            for (float& e : x)
                e = round_to_bf16(e);
    }

    static std::vector<Cache> cache_of(std::size_t n, std::uint64_t seed) {
        if constexpr (std::is_same_v<Cache, bf16> || std::is_same_v<Cache, fp16>) {
            std::vector<float> f(n);
            measure::fill_uniform(f, seed);
            std::vector<Cache> h(n);
            narrow(f.data(), h.data(), static_cast<std::int64_t>(n));
            return h;
        } else {
            std::vector<Cache> x(n);
            measure::fill_uniform(x, seed);
            return x;
        }
    }

    DecodeArgs<Scalar, Cache> args() {
        DecodeArgs<Scalar, Cache> a;
        a.q = TensorView<const Scalar>::packed(q.data(), batch, heads, n_new, d);
        const std::int64_t outer =
            block_size > 0 ? static_cast<std::int64_t>(k.size()) / (kv_heads * rows * d) : batch;
        a.k = TensorView<const Cache>::packed(k.data(), outer, kv_heads, rows, d);
        a.v = TensorView<const Cache>::packed(v.data(), outer, kv_heads, rows, d);
        a.kv_lens = lens.data();
        a.window = window;
        a.pattern = pattern;
        a.pattern_seed = pattern_seed;
        if (block_size > 0)
            a.block_table = {table.data(), batch, max_blocks, max_blocks};
        a.o = TensorView<Scalar>::packed(o.data(), batch, heads, n_new, d);
        a.lse = TensorView<Scalar>::packed(lse.data(), batch, heads, n_new, 1);
        return a;
    }

    /// Cached row `p` of (b, g) as a pointer into k or v.
    const Cache*
    row(const std::vector<Cache>& x, std::int64_t b, std::int64_t g, std::int64_t p) const {
        if (block_size == 0)
            return x.data() + ((b * kv_heads + g) * rows + p) * d;
        const std::int64_t blk = table[static_cast<std::size_t>(b * max_blocks + p / block_size)];
        return x.data() + ((blk * kv_heads + g) * rows + p % block_size) * d;
    }

    /// ioattn::decode_reference<T> of sequence b over its cached rows (widened to T): O then L.
    template <typename T>
    std::pair<std::vector<T>, std::vector<T>> attention_of(std::int64_t b, int threads) const {
        const std::int64_t len = lens[static_cast<std::size_t>(b)];
        std::vector<T> qq(static_cast<std::size_t>(heads * n_new * d));
        std::vector<T> kk(static_cast<std::size_t>(kv_heads * len * d)), vv(kk.size());
        for (std::size_t e = 0; e < qq.size(); ++e)
            qq[e] = static_cast<T>(q[static_cast<std::size_t>(b * heads * n_new * d) + e]);
        for (std::int64_t g = 0; g < kv_heads; ++g)
            for (std::int64_t j = 0; j < len; ++j)
                for (std::int64_t x = 0; x < d; ++x) {
                    const auto e = static_cast<std::size_t>((g * len + j) * d + x);
                    kk[e] = widen<T>(row(k, b, g, j)[x]);
                    vv[e] = widen<T>(row(v, b, g, j)[x]);
                }
        DecodeShape shape;
        shape.batch = batch;
        shape.heads = heads;
        shape.kv_heads = kv_heads;
        shape.n_new = n_new;
        shape.d = d;
        shape.kv_lens = lens;
        shape.window = window;
        shape.pattern = pattern;
        shape.pattern_seed = pattern_seed;
        return decode_reference<T>(shape, b, qq.data(), kk.data(), vv.data(), threads);
    }

    template <typename T>
    static T widen(Cache c) {
        if constexpr (std::is_same_v<Cache, bf16> || std::is_same_v<Cache, fp16>)
            return static_cast<T>(static_cast<float>(c));
        else
            return static_cast<T>(c);
    }
};

/// Max |x - ref| over O and L, infinities equal, NaN against anything: +inf.
template <typename A>
double max_error(const std::vector<A>& x, const std::vector<double>& ref) {
    double worst = 0;
    for (std::size_t e = 0; e < x.size(); ++e) {
        const auto a = static_cast<double>(x[e]);
        if (std::isinf(ref[e]) && a == ref[e])
            continue;
        const double err = std::abs(a - ref[e]);
        worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
    }
    return worst;
}

/// --check: every sequence against ioattn::attention<double>, and the working type's
/// ioattn::attention as the naive peer: passed iff err <= 2 err(peer) + tiny.
template <typename Scalar, typename Cache>
nlohmann::json check_of(const DecodeData<Scalar, Cache>& data, int threads) {
    double err = 0, peer = 0;
    const std::int64_t per_o = data.heads * data.n_new * data.d, per_l = data.heads * data.n_new;
    for (std::int64_t b = 0; b < data.batch; ++b) {
        const auto [ro, rl] = data.template attention_of<double>(b, threads);
        const auto [po, pl] = data.template attention_of<Scalar>(b, threads);
        const std::vector<Scalar> o(data.o.begin() + b * per_o, data.o.begin() + (b + 1) * per_o);
        const std::vector<Scalar> l(data.lse.begin() + b * per_l,
                                    data.lse.begin() + (b + 1) * per_l);
        err = std::max({err, max_error(o, ro), max_error(l, rl)});
        peer = std::max({peer, max_error(po, ro), max_error(pl, rl)});
    }
    const double tiny = 8.0 * static_cast<double>(std::numeric_limits<Scalar>::epsilon());
    const bool passed = err <= 2.0 * peer + tiny;
    return {{"passed", passed},
            {"max_abs_error", err},
            {"attention_error", peer},
            {"tiny", tiny},
            {"reference", "ioattn::attention<double> on the same values"}};
}

template <typename Scalar, typename Cache>
nlohmann::json run_typed(const DecodeSetup& c) {
    DecodeData<Scalar, Cache> data(c, c.kv_lens);
    DecodeOptions opts;
    opts.chunk = c.chunk;
    opts.threads = c.threads;
    opts.where = kDecodeRunWhere;
    const DecodeArgs<Scalar, Cache> args = data.args();
    DecodeReport report = decode(args, opts); // validates
    measure::warm_up_calls([&] { decode(args, opts); });
    std::vector<double> t;
    for (int r = 0; r < std::max(c.repeat, 1); ++r)
        t.push_back(measure::seconds_of([&] { decode(args, opts); }));
    std::sort(t.begin(), t.end());
    const double median =
        t.size() % 2 == 1 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
    const DecodePlan& plan = report.plan;
    const std::int64_t kv_words =
        plan.kv_rows() * plan.shape.kv_heads * (plan.shape.d + plan.shape.d_v);
    const auto kv_bytes = kv_words * static_cast<std::int64_t>(sizeof(Cache));
    nlohmann::json j = {{"batch", plan.shape.batch},
                        {"heads", plan.shape.heads},
                        {"kv_heads", plan.shape.kv_heads},
                        {"d", plan.shape.d},
                        {"new_tokens", plan.shape.n_new},
                        {"kv_lens", plan.shape.kv_lens},
                        {"page_size", c.page_size},
                        {"pattern", c.pattern},
                        {"window", plan.shape.window},
                        {"dtype", c.dtype},
                        {"isa", std::string(to_string(active_isa()))},
                        {"threads", c.threads},
                        {"chunk", plan.chunk},
                        {"tasks", plan.tasks()},
                        {"repeat", t.size()},
                        {"seconds", median},
                        {"seconds_min", t.front()},
                        {"seconds_max", t.back()},
                        {"kv_bytes", kv_bytes},
                        {"gbps", static_cast<double>(kv_bytes) / median * 1e-9},
                        {"gflops", flop_count_decode(plan) / median * 1e-9}};
    if (c.bandwidth_bytes > 0) {
        const double bw = measure::measure_read_bandwidth(c.bandwidth_bytes, c.threads, 5);
        j["bandwidth_gbs"] = bw;
        j["bandwidth_ratio"] = j["gbps"].get<double>() / bw;
    }
    if (c.count_io) {
        DecodeOptions counted = opts;
        counted.count_io = true;
        const DecodeReport r = decode(args, counted);
        const IoReport lower = decode_lower_bound(plan);
        j["io"] = {
            {"reads", r.io->reads},
            {"writes", r.io->writes},
            {"peak_resident", r.io->peak},
            {"closed_form", {{"reads", r.closed_form->reads}, {"writes", r.closed_form->writes}}},
            {"agrees", *r.io == *r.closed_form},
            {"lower_bound", {{"reads", lower.reads}, {"writes", lower.writes}}},
            {"ratio_to_lower_bound",
             static_cast<double>(r.io->total()) / static_cast<double>(lower.total())}};
        if (!(*r.io == *r.closed_form))
            throw CheckFailed(std::string(kDecodeRunWhere) +
                              ": counted I/O differs from the closed form");
    }
    if (c.check) {
        decode(args, opts);
        j["check"] = check_of(data, c.threads);
    }
    return j;
}

} // namespace

nlohmann::json run_decode(const DecodeSetup& s) {
    if (s.dtype == "double")
        return run_typed<double, double>(s);
    if (s.dtype == "bf16")
        return run_typed<float, bf16>(s);
    if (s.dtype == "fp16")
        return run_typed<float, fp16>(s);
    return run_typed<float, float>(s);
}

} // namespace ioattn::app
