// ioattn decode: decode attention over a key/value cache (ioattn/decode.hpp). Builds a batch of
// sequences with their cached lengths (--kv-len or --kv-lens), contiguous or paged
// (--page-size, blocks placed in a seeded shuffled order as an allocator leaves them), times
// --repeat calls (median, min, max), and sets the cached bytes per second beside the memory's
// read bandwidth measured in the same run. --check compares every sequence with
// ioattn::attention in double on the same values (the error-ratio rule of run --check, the
// working type's ioattn::attention as the naive peer); --count-io counts a run against the
// closed form and the lower bound.

#include "commands.hpp"
#include "options.hpp"
#include "output.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/isa.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

namespace {

constexpr const char* kWhere = "decode";

struct DecodeCliOptions {
    std::int64_t batch = 1;
    std::int64_t heads = 32;
    std::int64_t kv_heads = 8;
    std::int64_t d = 128;
    std::int64_t kv_len = 4096;
    std::string kv_lens;
    std::int64_t new_tokens = 1;
    std::int64_t page_size = 0;
    std::int64_t chunk = 0;
    std::string dtype = "float";
    bool check = false;
    bool count_io = false;
    int repeat = 10;
    int threads = 0;
    std::uint64_t seed = 42;
    bool json = false;
    bool no_bandwidth = false;
};

std::vector<std::int64_t> lengths_of(const DecodeCliOptions& o) {
    if (o.kv_lens.empty())
        return std::vector<std::int64_t>(
            static_cast<std::size_t>(std::max<std::int64_t>(o.batch, 0)), o.kv_len);
    std::vector<std::int64_t> lens;
    std::stringstream ss(o.kv_lens);
    std::string item;
    while (std::getline(ss, item, ',')) {
        std::size_t used = 0;
        std::int64_t v = -1;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size() || item.empty())
            throw UsageError(std::string(kWhere) + ": --kv-lens '" + o.kv_lens +
                             "' is not a comma-separated list of lengths");
        lens.push_back(v);
    }
    if (static_cast<std::int64_t>(lens.size()) != o.batch && o.batch != 1)
        throw UsageError(std::string(kWhere) + ": --kv-lens has " + std::to_string(lens.size()) +
                         " lengths but --batch is " + std::to_string(o.batch));
    return lens;
}

/// The operands of one decode problem, owned.
template <typename Scalar, typename Cache>
struct DecodeData {
    std::int64_t batch, heads, kv_heads, n_new, d, rows, block_size = 0, max_blocks = 0;
    std::vector<std::int64_t> lens, table;
    std::vector<Scalar> q, o, lse;
    std::vector<Cache> k, v; ///< contiguous [B][G][rows][d] or paged [blocks][G][bs][d]

    DecodeData(const DecodeCliOptions& c, std::vector<std::int64_t> l)
        : batch(static_cast<std::int64_t>(l.size()))
        , heads(c.heads)
        , kv_heads(c.kv_heads)
        , n_new(c.new_tokens)
        , d(c.d)
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

    static void fill(std::vector<Scalar>& x, std::uint64_t seed) {
        if constexpr (std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>)
            measure::fill_uniform(x, seed);
    }

    static std::vector<Cache> cache_of(std::size_t n, std::uint64_t seed) {
        if constexpr (std::is_same_v<Cache, bf16>) {
            std::vector<float> f(n);
            measure::fill_uniform(f, seed);
            std::vector<bf16> h(n);
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

    /// ioattn::attention<T> of sequence b over its cached rows (widened to T): O then L.
    template <typename T>
    std::pair<std::vector<T>, std::vector<T>> attention_of(std::int64_t b, int threads) const {
        const std::int64_t len = lens[static_cast<std::size_t>(b)];
        std::vector<T> oo(static_cast<std::size_t>(heads * n_new * d), T(0));
        std::vector<T> ll(static_cast<std::size_t>(heads * n_new),
                          -std::numeric_limits<T>::infinity());
        if (len == 0)
            return {oo, ll};
        Problem p;
        p.heads = heads;
        p.kv_heads = kv_heads;
        p.n_q = n_new;
        p.n_k = len;
        p.d = d;
        p.causal = true;
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
        auto a = ForwardArgs<T>::packed(p, qq.data(), kk.data(), vv.data(), oo.data(), ll.data());
        AttentionOptions opts;
        opts.schedule = Schedule::fused;
        opts.threads = threads;
        opts.where = kWhere;
        attention(a, {}, opts);
        return {oo, ll};
    }

    template <typename T>
    static T widen(Cache c) {
        if constexpr (std::is_same_v<Cache, bf16>)
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
nlohmann::json run_typed(const DecodeCliOptions& c) {
    DecodeData<Scalar, Cache> data(c, lengths_of(c));
    DecodeOptions opts;
    opts.chunk = c.chunk;
    opts.threads = c.threads;
    opts.where = kWhere;
    const DecodeArgs<Scalar, Cache> args = data.args();
    DecodeReport report = decode(args, opts); // validates; the warm-up
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
    if (!c.no_bandwidth) {
        const double bw = measure::measure_read_bandwidth(std::int64_t{512} << 20, c.threads, 5);
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
            throw CheckFailed(std::string(kWhere) + ": counted I/O differs from the closed form");
    }
    if (c.check) {
        decode(args, opts);
        j["check"] = check_of(data, c.threads);
    }
    return j;
}

void print_text(const nlohmann::json& j) {
    std::cout << "decode: batch " << j["batch"].get<std::int64_t>() << ", heads "
              << j["heads"].get<std::int64_t>() << " / kv heads "
              << j["kv_heads"].get<std::int64_t>() << ", d " << j["d"].get<std::int64_t>()
              << ", new tokens " << j["new_tokens"].get<std::int64_t>() << ", "
              << j["dtype"].get<std::string>()
              << (j["page_size"].get<std::int64_t>() > 0
                      ? ", paged (block " + std::to_string(j["page_size"].get<std::int64_t>()) + ")"
                      : ", contiguous")
              << ", isa " << j["isa"].get<std::string>() << "\n";
    std::cout << "  chunks of " << j["chunk"].get<std::int64_t>() << " keys, "
              << j["tasks"].get<std::int64_t>() << " tasks\n";
    std::cout << "  time      " << sig(j["seconds"].get<double>() * 1e3) << " ms median of "
              << j["repeat"].get<std::size_t>() << " (min "
              << sig(j["seconds_min"].get<double>() * 1e3) << ", max "
              << sig(j["seconds_max"].get<double>() * 1e3) << ")\n";
    std::cout << "  cache     " << grouped(j["kv_bytes"].get<std::int64_t>()) << " bytes at "
              << fixed(j["gbps"].get<double>(), 1) << " GB/s";
    if (j.contains("bandwidth_gbs"))
        std::cout << " = " << fixed(j["bandwidth_ratio"].get<double>(), 2)
                  << "x the read bandwidth measured now ("
                  << fixed(j["bandwidth_gbs"].get<double>(), 1) << " GB/s)";
    std::cout << "\n";
    if (j.contains("io")) {
        const auto& io = j["io"];
        std::cout << "  I/O       " << grouped(io["reads"].get<std::int64_t>()) << " words read, "
                  << grouped(io["writes"].get<std::int64_t>()) << " written (closed form "
                  << (io["agrees"].get<bool>() ? "agrees" : "DIFFERS") << "), "
                  << fixed(io["ratio_to_lower_bound"].get<double>(), 4) << "x the lower bound\n";
    }
    if (j.contains("check")) {
        const auto& ch = j["check"];
        std::cout << "  check     " << (ch["passed"].get<bool>() ? "passed" : "FAILED")
                  << ": max |error| " << sig(ch["max_abs_error"].get<double>())
                  << " (ioattn::attention in the working type: "
                  << sig(ch["attention_error"].get<double>()) << ")\n";
    }
}

} // namespace

} // namespace ioattn::app

void register_decode(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<DecodeCliOptions>();
    auto* cmd = app.add_subcommand("decode",
                                   "Decode attention over a key/value cache: time it "
                                   "against the memory's read bandwidth");
    cmd->add_option("--batch", o->batch, "Sequences")->capture_default_str();
    cmd->add_option("--heads", o->heads, "Query heads")->capture_default_str();
    cmd->add_option("--kv-heads", o->kv_heads, "Key/value heads (divides --heads)")
        ->capture_default_str();
    cmd->add_option("--d", o->d, "Head dimension")->capture_default_str();
    cmd->add_option("--kv-len", o->kv_len, "Cached length of every sequence (new tokens included)")
        ->capture_default_str();
    cmd->add_option("--kv-lens", o->kv_lens, "Cached lengths, one per sequence: a,b,c");
    cmd->add_option("--new-tokens", o->new_tokens, "New query tokens per sequence (1-16)")
        ->capture_default_str();
    cmd->add_option("--page-size", o->page_size, "Paged cache of blocks of P rows (0: contiguous)")
        ->capture_default_str();
    cmd->add_option("--chunk", o->chunk, "Keys per chunk (0: the library's)")
        ->capture_default_str();
    cmd->add_option("--dtype", o->dtype, "Cache type: float, double or bf16 (queries: float)")
        ->check(CLI::IsMember({"float", "double", "bf16"}))
        ->capture_default_str();
    cmd->add_flag("--check", o->check, "Compare with ioattn::attention in double");
    cmd->add_flag("--count-io", o->count_io, "Count the I/O against the closed form and bound");
    cmd->add_option("--repeat", o->repeat, "Timed calls (median, min, max)")->capture_default_str();
    cmd->add_option("--threads", o->threads, "Threads (0: every core)")->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the data")->capture_default_str();
    cmd->add_flag("--no-bandwidth", o->no_bandwidth, "Skip the read-bandwidth measurement");
    cmd->add_flag("--json", o->json, "JSON output");
    cmd->callback([o] {
        if (!o->kv_lens.empty() && o->batch == 1)
            o->batch = static_cast<std::int64_t>(lengths_of(*o).size());
        if (o->batch < 1 || o->heads < 1 || o->kv_heads < 1 || o->d < 1 || o->page_size < 0)
            throw UsageError(
                std::string(kWhere) +
                ": --batch, --heads, --kv-heads, --d must be >= 1 and --page-size >= 0");
        nlohmann::json j;
        if (o->dtype == "double")
            j = run_typed<double, double>(*o);
        else if (o->dtype == "bf16")
            j = run_typed<float, ioattn::bf16>(*o);
        else
            j = run_typed<float, float>(*o);
        if (o->json)
            std::cout << j.dump(2) << "\n";
        else
            print_text(j);
        if (j.contains("check") && !j["check"]["passed"].get<bool>())
            throw CheckFailed(std::string(kWhere) + ": check failed");
    });
}
