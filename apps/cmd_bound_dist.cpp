// ioattn bound --ranks: the distributed time bound and the ring's simulated scaling
// (bound_dist.hpp). Per step s of the ring every rank r computes its pairs with the block of
// rank r - s while the next block travels; the step takes max(slowest rank's compute, transfer)
// and the pass the sum over steps (the backward adds the dK/dV sums' hops, both messages sharing
// the link). The per-rank kernel rate is measured now (fused kernel, a 2048-row block of the
// problem's heads and d) unless --kernel-gflops gives it.

#include "bound_dist.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "output.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/parallel.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

namespace {

constexpr const char* kBoundDistWhere = "bound";

/// sum over x in [x0, x0 + count) of clamp(x, 0, n).
double clamped_sum(std::int64_t x0, std::int64_t count, std::int64_t n) {
    const auto tri = [](std::int64_t a, std::int64_t b) { // sum of x for x in [a, b)
        return b > a ? 0.5 * static_cast<double>(a + b - 1) * static_cast<double>(b - a) : 0.0;
    };
    const std::int64_t x1 = x0 + count;
    const std::int64_t lo = std::clamp<std::int64_t>(x0, 0, x1); // first x > 0 region
    const std::int64_t hi = std::clamp<std::int64_t>(n, lo, x1); // first x >= n
    return tri(lo, hi) + static_cast<double>(x1 - hi) * static_cast<double>(n);
}

/// Visible (query, key) pairs of query range qr against key range kr (bottom-right causal).
double pairs(const Problem& p, const dist::Range& qr, const dist::Range& kr) {
    if (!p.causal)
        return static_cast<double>(qr.size()) * static_cast<double>(kr.size());
    // row i sees min(kr.size, max(0, i + n_k - n_q - kr.begin + 1)) keys of kr
    return clamped_sum(qr.begin + p.n_k - p.n_q - kr.begin + 1, qr.size(), kr.size());
}

/// One row of the simulation.
struct Prediction {
    int ranks = 0;
    std::int64_t rows = 0;        ///< most query rows per rank
    double step_compute = 0;      ///< slowest step's compute, s
    double step_transfer = 0;     ///< one step's transfer, s
    double seconds = 0;           ///< predicted time of the pass
    double efficiency = 0;        ///< T_1 / (P T_P)
    bool hidden = false;          ///< every step's transfer under its compute
    std::int64_t words = 0;       ///< busiest rank's received words (closed form)
    std::int64_t bound_words = 0; ///< busiest rank's lower bound
    double bound_seconds = 0;     ///< max(local compute bound, w words / link)
};

struct Model {
    Problem p;
    Pass pass = Pass::forward;
    dist::Layout layout = dist::Layout::contiguous;
    double rate = 0; ///< per-rank kernel rate, flop/s
    double link = 0; ///< bytes/s
    double latency = 0;
    double peak = 0; ///< flop/s of the local bound
    std::int64_t word_bytes = 4;

    [[nodiscard]] double flops_per_pair() const {
        return 2.0 * static_cast<double>(p.batch_heads() * (p.d + p.d_v)) *
               (pass == Pass::backward ? 2.5 : 1.0);
    }
};

Prediction predict(const Model& m, int ranks) {
    const Problem& p = m.p;
    const dist::Sharding queries(m.layout, p.n_q, ranks);
    const dist::Sharding keys(m.layout, p.n_k, ranks);
    const bool backward = m.pass == Pass::backward;
    const double w = static_cast<double>(m.word_bytes * dist::kv_row_words(p));
    const double hop = m.latency + w * static_cast<double>(keys.max_rows()) / m.link;
    Prediction r;
    r.ranks = ranks;
    r.rows = queries.max_rows();
    r.step_transfer = backward ? 2 * hop : hop; // K/V and the dK/dV sums share the link
    r.hidden = true;
    double total_pairs = 0, busiest = 0;
    std::vector<double> rank_pairs(static_cast<std::size_t>(ranks), 0.0);
    for (int s = 0; s < ranks; ++s) {
        double slowest = 0;
        for (int q = 0; q < ranks; ++q) {
            double x = 0;
            for (const dist::Range& qr : queries.ranges(q))
                for (const dist::Range& kr : keys.ranges((q - s + ranks) % ranks))
                    x += pairs(p, qr, kr);
            slowest = std::max(slowest, x);
            total_pairs += x;
            rank_pairs[static_cast<std::size_t>(q)] += x;
        }
        const double compute = slowest * m.flops_per_pair() / m.rate;
        r.step_compute = std::max(r.step_compute, compute);
        const double transfer =
            s + 1 < ranks ? r.step_transfer : (backward && ranks > 1 ? hop : 0.0);
        r.seconds += std::max(compute, transfer);
        r.hidden = r.hidden && (s + 1 == ranks || compute >= transfer);
    }
    if (backward && ranks > 1)
        r.seconds += hop; // the last sums' hop home
    r.efficiency = total_pairs * m.flops_per_pair() / m.rate / (ranks * r.seconds);
    for (int q = 0; q < ranks; ++q) {
        busiest = std::max(busiest, rank_pairs[static_cast<std::size_t>(q)]);
        const dist::WireBytes wire{m.word_bytes, m.word_bytes}; // only the words are read
        const auto c = backward ? dist::comm_cost_ring_backward(p, keys, q, wire)
                                : dist::comm_cost_ring_forward(p, keys, q, wire);
        r.words = std::max(r.words, c.received_words);
        r.bound_words = std::max(r.bound_words, dist::comm_lower_bound(p, queries, keys, q));
    }
    r.bound_seconds = std::max(busiest * m.flops_per_pair() / m.peak,
                               static_cast<double>(m.word_bytes * r.bound_words) / m.link);
    return r;
}

/// Rows per rank from which one step's transfer hides under its compute (full blocks; causal
/// zigzag: half of each block's pairs; contiguous causal: the busiest rank's full blocks).
double rows_to_hide(const Model& m) {
    const bool backward = m.pass == Pass::backward;
    const double half = m.p.causal && m.layout == dist::Layout::zigzag ? 0.5 : 1.0;
    const double a = half * m.flops_per_pair() / m.rate; // compute = a x^2
    const double hops = backward ? 2.0 : 1.0;            // transfer = c + b x
    const double b = hops * static_cast<double>(m.word_bytes * dist::kv_row_words(m.p)) / m.link;
    const double c = hops * m.latency;
    return (b + std::sqrt(b * b + 4 * a * c)) / (2 * a);
}

/// The fused kernel's rate (flop/s, the bound's flop convention) on one block of 2048 rows.
double measure_rate(const Problem& p, Pass pass, int threads) {
    Problem block = p;
    block.n_q = block.n_k = std::min<std::int64_t>(2048, std::max(p.n_q, p.n_k));
    block.causal = false;
    const MemoryModel mem = MemoryModel::per_core_l2(4);
    measure::ForwardData<float> data(block, 7);
    std::vector<float> d_o(data.o.size(), 0.5F), dq(data.q.size()), dk(data.k.size()),
        dv(data.v.size());
    const Tiling tf = Tiling::tuned(Schedule::fused, mem, block);
    const Tiling tb = Tiling::tuned(Schedule::fused, mem, block, Pass::backward);
    NullCounter c;
    const auto fwd = [&] { dense::forward(data.args(), tf, mem, c); };
    const auto bwd = [&] {
        dense::backward(BackwardArgs<float>::packed(block,
                                                    data.q.data(),
                                                    data.k.data(),
                                                    data.v.data(),
                                                    data.o.data(),
                                                    data.lse.data(),
                                                    d_o.data(),
                                                    dq.data(),
                                                    dk.data(),
                                                    dv.data()),
                        tb,
                        mem,
                        c);
    };
    return with_threads(threads, [&] {
        fwd();
        const double s = pass == Pass::backward ? measure::median_seconds(3, bwd)
                                                : measure::median_seconds(3, fwd);
        return flop_count_forward(block) * (pass == Pass::backward ? 2.5 : 1.0) / s;
    });
}

std::vector<int> ranks_of(const std::string& text) {
    if (text.find(':') == std::string::npos) {
        const auto [lo, hi] = parse_range(text + ":" + text, "bound: --ranks");
        return {static_cast<int>(lo)};
    }
    const auto [lo, hi] = parse_range(text, "bound: --ranks");
    if (hi > (1 << 20))
        throw InvalidArgument("bound: --ranks " + text + " (expected at most 1048576 ranks)");
    std::vector<int> r;
    for (std::int64_t x = lo; x <= hi; x *= 2)
        r.push_back(static_cast<int>(x));
    return r;
}

nlohmann::json json_of(const Prediction& r) {
    return {{"ranks", r.ranks},
            {"rows_per_rank", r.rows},
            {"step_compute_seconds", r.step_compute},
            {"step_transfer_seconds", r.step_transfer},
            {"seconds", r.seconds},
            {"efficiency", r.efficiency},
            {"hidden", r.hidden},
            {"received_words", r.words},
            {"lower_bound_words", r.bound_words},
            {"bound_seconds", r.bound_seconds}};
}

} // namespace

void add_dist_bound_options(CLI::App& cmd, DistBoundOptions& o) {
    cmd.add_option(
        "--ranks",
        o.ranks,
        "Distributed bound and ring simulation for P ranks, or lo:hi for a table over the "
        "powers of two from lo to hi");
    cmd.add_option("--link-bandwidth", o.link_gbs, "With --ranks: each rank's link, GB/s")
        ->check(CLI::Range(1e-6, 1e12));
    cmd.add_option("--link-latency", o.link_latency_us, "With --ranks: per message, microseconds")
        ->check(CLI::Range(0.0, 1e9))
        ->capture_default_str();
    cmd.add_option("--kernel-gflops",
                   o.kernel_gflops,
                   "With --ranks: the per-rank kernel rate (default: measured now, fused kernel, "
                   "2048-row block, --threads)")
        ->check(CLI::Range(1e-6, 1e12));
    cmd.add_option("--dist", o.dist, "With --ranks: ring (contiguous shards) or zigzag")
        ->check(CLI::IsMember({"ring", "zigzag"}))
        ->capture_default_str();
}

void run_dist_bound(const DistBoundOptions& o,
                    const Problem& problem,
                    Pass pass,
                    const LocalMachine& machine,
                    bool json) {
    if (o.link_gbs <= 0)
        throw UsageError(std::string(kBoundDistWhere) + ": --ranks needs --link-bandwidth GB/s");
    Model m;
    m.p = problem;
    m.pass = pass;
    m.layout = o.dist == "zigzag" ? dist::Layout::zigzag : dist::Layout::contiguous;
    m.link = o.link_gbs * 1e9;
    m.latency = o.link_latency_us * 1e-6;
    m.peak = machine.peak_gflops * 1e9;
    m.word_bytes = machine.word_bytes;
    const std::vector<int> ranks = ranks_of(o.ranks);
    for (const int r : ranks) // every P valid before measuring
        (void)dist::Sharding(m.layout, std::min(problem.n_q, problem.n_k), r);
    const bool measured = o.kernel_gflops <= 0;
    m.rate = measured ? measure_rate(problem, pass, machine.threads) : o.kernel_gflops * 1e9;
    std::vector<Prediction> rows;
    for (const int r : ranks)
        rows.push_back(predict(m, r));
    const double hide = rows_to_hide(m);
    if (json) {
        nlohmann::json j = {{"pass", std::string(to_string(pass))},
                            {"dist", o.dist},
                            {"n_q", problem.n_q},
                            {"n_k", problem.n_k},
                            {"link_bandwidth_gbs", o.link_gbs},
                            {"link_latency_us", o.link_latency_us},
                            {"kernel_gflops", m.rate * 1e-9},
                            {"kernel_rate", measured ? "measured now" : "given"},
                            {"rows_per_rank_to_hide", hide}};
        j["table"] = nlohmann::json::array();
        for (const Prediction& r : rows)
            j["table"].push_back(json_of(r));
        std::cout << j.dump(2) << '\n';
        return;
    }
    std::ostream& os = std::cout;
    os << "ioattn bound --ranks " << o.ranks << ": " << to_string(pass) << ", --dist " << o.dist
       << ", B*H = " << problem.batch_heads() << " (kv " << problem.kv_heads
       << "), n = " << problem.n_q << ", d = " << problem.d << (problem.causal ? ", causal" : "")
       << '\n';
    os << "  link         " << sig(o.link_gbs) << " GB/s, " << sig(o.link_latency_us)
       << " us per message; kernel " << fixed(m.rate * 1e-9, 1) << " GFLOP/s per rank ("
       << (measured ? "measured now" : "given") << "); bound peak " << sig(machine.peak_gflops)
       << " GFLOP/s\n";
    os << "  hides from   " << grouped(static_cast<std::int64_t>(std::ceil(hide)))
       << " rows per rank (one step's transfer <= its compute)\n";
    Table t({"P",
             "rows/rank",
             "compute/step s",
             "transfer/step s",
             "time s",
             "efficiency",
             "hidden",
             "words/rank",
             "bound words",
             "bound s"});
    for (const Prediction& r : rows)
        t.add({std::to_string(r.ranks),
               grouped(r.rows),
               sig(r.step_compute),
               sig(r.step_transfer),
               sig(r.seconds),
               fixed(r.efficiency, 3),
               r.hidden ? "yes" : "no",
               grouped(r.words),
               grouped(r.bound_words),
               sig(r.bound_seconds)});
    t.print(os);
    os << "  (simulated from the closed-form words and the kernel rate; the bound is max(F_rank / "
          "peak, w words / link), optimistic)\n";
}

} // namespace ioattn::app
