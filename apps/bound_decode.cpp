// ioattn bound --decode (docs/design.md section 15): one decode step is bandwidth-bound: the
// cache is read once (the lower bound), 2 flops per cached word and query row of the group.

#include "bound_decode.hpp"

#include "output.hpp"

#include <ioattn/decode.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace ioattn::app {

void print_decode_bound(const Problem& p, const Machine& m, bool json) {
    DecodeShape s;
    s.batch = p.batch;
    s.heads = p.heads;
    s.kv_heads = p.kv_heads;
    s.n_new = p.n_q;
    s.d = p.d;
    s.d_v = p.d_v;
    s.kv_lens.assign(static_cast<std::size_t>(p.batch), p.n_k);
    DecodeOptions opts;
    opts.where = "bound --decode";
    const DecodePlan plan = plan_decode(s, opts);
    const IoReport lower = decode_lower_bound(plan);
    const IoReport exact = io_cost_decode(plan);
    const double w = static_cast<double>(m.word_bytes);
    const double flops = flop_count_decode(plan);
    const double io_seconds = w * static_cast<double>(lower.total()) / (m.bandwidth_gbs * 1e9);
    const double exact_seconds = w * static_cast<double>(exact.total()) / (m.bandwidth_gbs * 1e9);
    const double compute_seconds = flops / (m.peak_gflops * 1e9);
    const double bound = std::max(io_seconds, compute_seconds);
    const char* limited = io_seconds >= compute_seconds ? "memory" : "compute";
    if (json) {
        const nlohmann::json j = {{"decode",
                                   {{"batch", p.batch},
                                    {"heads", p.heads},
                                    {"kv_heads", p.kv_heads},
                                    {"new_tokens", p.n_q},
                                    {"kv_len", p.n_k},
                                    {"d", p.d},
                                    {"d_v", p.d_v}}},
                                  {"preset", m.preset},
                                  {"source", m.source},
                                  {"word_bytes", m.word_bytes},
                                  {"bandwidth_gbs", m.bandwidth_gbs},
                                  {"peak_gflops", m.peak_gflops},
                                  {"lower_bound_words", lower.total()},
                                  {"schedule_words", exact.total()},
                                  {"chunk", plan.chunk},
                                  {"flops", flops},
                                  {"time",
                                   {{"io_seconds", io_seconds},
                                    {"compute_seconds", compute_seconds},
                                    {"bound_seconds", bound},
                                    {"schedule_io_seconds", exact_seconds},
                                    {"limited_by", limited}}}};
        std::cout << j.dump(2) << '\n';
        return;
    }
    std::ostream& os = std::cout;
    os << "ioattn bound --decode: " << p.batch << " sequence(s) of " << p.n_k << " cached rows, "
       << p.n_q << " new token(s), heads " << p.heads << " over " << p.kv_heads
       << " kv heads, d = " << p.d << '\n';
    if (m.preset != "none")
        os << "  preset       " << m.preset << ": " << m.source << '\n';
    os << "  machine      w = " << m.word_bytes << " bytes, beta = " << sig(m.bandwidth_gbs)
       << " GB/s, P = " << sig(m.peak_gflops) << " GFLOP/s\n";
    os << "  I/O          lower bound " << grouped(lower.total())
       << " words (every visible cached word once, Q, O, L); the decode schedule "
       << grouped(exact.total()) << " (chunks of " << plan.chunk << ")\n";
    os << "  flops        F = " << sig(flops) << " (2 (d + d_v) per allowed pair)\n";
    os << "  time bound   max(w L / beta, F / P) = max(" << sig(io_seconds) << " s, "
       << sig(compute_seconds) << " s) = " << sig(bound) << " s (" << limited << "-bound)\n";
    os << "               the schedule's exact traffic takes " << sig(exact_seconds)
       << " s at beta\n";
}

} // namespace ioattn::app
