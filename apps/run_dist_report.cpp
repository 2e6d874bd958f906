// The text report of `ioattn run --dist` (run_dist.hpp): the problem, the ranks, the time, the
// counted communication (per rank with --count-io) and the --check line, from the run's JSON.

#include "run_dist_report.hpp"

#include "output.hpp"

#include <cstdint>
#include <iostream>
#include <string>

namespace ioattn::app {

void print_dist_text(const nlohmann::json& j, const DistRun& r) {
    std::ostream& os = std::cout;
    os << "ioattn run --dist " << r.dist << ": " << j["pass"].get<std::string>() << ", "
       << j["dtype"].get<std::string>() << ", pattern " << j["pattern"].get<std::string>()
       << ", B=" << j["batch"] << " H=" << j["heads"] << " (kv " << j["kv_heads"]
       << ") n_q=" << j["n_q"] << " n_k=" << j["n_k"] << " d=" << j["d"] << " d_v=" << j["d_v"]
       << " causal=" << (j["causal"].get<bool>() ? "yes" : "no") << '\n';
    os << "  ranks    " << j["ranks"] << " (" << j["layout"].get<std::string>()
       << " shards), threads " << j["threads"] << " per rank\n";
    os << "  schedule " << j["schedule"].get<std::string>() << ", tiling rows "
       << j["tiling"]["rows"] << ", cols " << j["tiling"]["cols"] << '\n';
    os << "  time     " << sig(j["seconds"].get<double>()) << " s ("
       << (r.repeat > 1 ? "median of " + std::to_string(r.repeat) : std::string("one run"))
       << ", slowest rank), " << fixed(j["gflops"].get<double>(), 2) << " GFLOP/s\n";
    const auto& c = j["comm"];
    os << "  comm     received " << grouped(c["received_words_max"].get<std::int64_t>())
       << " words, " << grouped(c["received_bytes_max"].get<std::int64_t>())
       << " bytes (busiest rank), "
       << (c["matches_closed_form"].get<bool>() ? "= closed form on every rank" : "!= closed form")
       << '\n';
    os << "           waiting " << sig(c["wait_seconds"].get<double>())
       << " s; the messages alone take " << sig(c["communication_only_seconds"].get<double>())
       << " s: " << fixed(100 * c["share_not_hidden"].get<double>(), 1)
       << "% of the communication not hidden ("
       << fixed(100 * c["share_of_time_waiting"].get<double>(), 2) << "% of the time)\n";
    if (!c["per_rank"].is_null()) {
        Table t({"rank", "sent", "received", "closed form", "lower bound", "counted/bound"});
        for (const auto& row : c["per_rank"])
            t.add({std::to_string(row["rank"].get<int>()),
                   grouped(row["sent_words"].get<std::int64_t>()),
                   grouped(row["received_words"].get<std::int64_t>()),
                   grouped(row["closed_form_received"].get<std::int64_t>()),
                   grouped(row["lower_bound"].get<std::int64_t>()),
                   row["ratio_to_bound"].is_null()
                       ? "-"
                       : fixed(row["ratio_to_bound"].get<double>(), 3)});
        t.print(os);
    }
    if (j["check"].is_null())
        return;
    const auto& k = j["check"];
    const bool bf16 = k.contains("tolerance");
    os << (bf16 ? "  check    error " : "  check    max_abs_error ")
       << sig(k["max_abs_error"].get<double>()) << ", single-process "
       << sig(k["single_error"].get<double>()) << ", |dist - single| "
       << sig(k["max_abs_diff"].get<double>()) << ": "
       << (k["passed"].get<bool>() ? "passed" : "FAILED")
       << (bf16 ? " (bf16 tolerance " + sig(k["tolerance"].get<double>()) +
                      ", docs/design.md section 16)\n"
                : " (err <= 2 single + " + sig(k["tiny"].get<double>()) + ")\n");
}

} // namespace ioattn::app
