// The text and CSV reports of `ioattn run` (see run_report.hpp).

#include "run_report.hpp"

#include "output.hpp"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iostream>
#include <string>
#include <vector>

namespace ioattn::app {

namespace {

std::string yes_no(bool b) {
    return b ? "yes" : "no";
}

void print_check(std::ostream& os, const nlohmann::json& j) {
    const auto& c = j["check"];
    const std::string verdict = c["passed"].get<bool>() ? "passed" : "FAILED";
    if (j["dtype"] != "bf16") {
        os << "  check    max_abs_error " << sig(c["max_abs_error"].get<double>()) << ", naive "
           << j["dtype"].get<std::string>() << " " << sig(c["naive_error"].get<double>())
           << ", error_ratio " << fixed(c["error_ratio"].get<double>(), 3) << ": " << verdict
           << " (err <= 2 naive + " << sig(c["tiny"].get<double>()) << ")\n";
    } else if (c.contains("relative_frobenius")) {
        const auto& f = c["relative_frobenius"];
        os << "  check    relative Frobenius error dQ " << sig(f["d_q"].get<double>()) << ", dK "
           << sig(f["d_k"].get<double>()) << ", dV " << sig(f["d_v"].get<double>()) << ": "
           << verdict << " (<= " << sig(c["tolerance"].get<double>())
           << " = 2.5 u_bf16; double reference on the bf16 inputs)\n";
    } else {
        os << "  check    max_abs_error " << sig(c["max_abs_error"].get<double>()) << " (L "
           << sig(c["lse_max_abs_error"].get<double>()) << "): " << verdict << " (O within "
           << sig(c["tolerance"].get<double>())
           << " = (u_bf16 + 2 (n_k + d) u_fp32) max|O_ref|; double reference on the bf16 "
              "inputs)\n";
    }
}

} // namespace

void print_run_text(const nlohmann::json& j, const SharedOptions& shared, int repeat) {
    std::ostream& os = std::cout;
    const auto wb = fast_word_bytes(shared);
    os << "ioattn run: " << j["pass"].get<std::string>() << ", " << j["dtype"].get<std::string>()
       << ", pattern " << j["pattern"].get<std::string>() << ", B=" << j["batch"]
       << " H=" << j["heads"] << " (kv " << j["kv_heads"] << ") n_q=" << j["n_q"]
       << " n_k=" << j["n_k"] << " d=" << j["d"] << " d_v=" << j["d_v"]
       << " causal=" << yes_no(j["causal"].get<bool>()) << '\n';
    const auto m = j["M"].get<std::int64_t>();
    os << "  M        " << grouped(m) << " words (" << bytes_of(m, wb) << ", "
       << (j.contains("cache_bytes")
               ? "planned for a cache of " + std::to_string(j["cache_bytes"].get<std::int64_t>()) +
                     " bytes"
           : memory_given(shared) ? "given"
                                  : "per-core L2")
       << "); threads " << j["threads"] << "; kernels " << j["isa"].get<std::string>()
       << (j["avx512_bf16"].get<bool>() ? " (CPU has AVX512_BF16)" : "") << '\n';
    os << "  schedule " << j["schedule"].get<std::string>();
    if (!j["selected_by"].is_null())
        os << " (auto chose it with --select " << j["selected_by"].get<std::string>() << ")";
    os << "; objective " << j["objective"].get<std::string>();
    if (j["objective"] == "io")
        os << " (the fewest counted words; planned for M' = "
           << grouped(j["planned_for"].get<std::int64_t>()) << ")";
    os << '\n';
    if (j.contains("variant") && !j["variant"].is_null()) {
        const auto& v = j["variant_plan"];
        os << "  variant  " << j["variant"].get<std::string>();
        if (j["variant"] == "permuted")
            os << " (rows " << (v["rows_reordered"].get<bool>() ? "" : "not ") << "reordered, keys "
               << (v["keys_reordered"].get<bool>() ? "" : "not ")
               << "reordered; inside: " << v["inner"].get<std::string>() << ")";
        os << "; blocks: " << v["tile_blocks"] << " tile, " << v["element_blocks"] << " element, "
           << v["split_blocks"] << " split; pairs: " << grouped(v["tile_pairs"].get<std::int64_t>())
           << " tile, " << grouped(v["element_pairs"].get<std::int64_t>()) << " element"
           << (v.value("element_in_tiles", false) ? " (inside the tile blocks)" : "") << "\n";
    }
    const auto& t = j["tiling"];
    if (j["schedule"] != "reference") {
        os << "  tiling   rows " << t["rows"] << ", cols " << t["cols"];
        if (t.contains("depth"))
            os << ", feature chunks " << t["depth"];
        if (t.contains("resident_words"))
            os << "; resident " << grouped(t["resident_words"].get<std::int64_t>()) << " words ("
               << bytes_of(t["resident_words"].get<std::int64_t>(), wb) << ")";
        os << '\n';
    }
    os << "  time     " << sig(j["seconds"].get<double>()) << " s ("
       << (repeat > 1 ? "median of " + std::to_string(repeat) : std::string("one run")) << "), "
       << fixed(j["gflops"].get<double>(), 2)
       << (j.contains("z_qk") ? " GFLOP/s (4 B H Z_QK d" : " GFLOP/s (4 B H n_q n_k d")
       << (j["causal"].get<bool>() ? " / 2" : "") << ")\n";
    const auto& b = j["bound"];
    const auto d = j["d"].get<std::int64_t>();
    os << "  bound    " << b["regime"].get<std::string>() << " (M "
       << (b["regime"] == "large-cache" ? ">=" : "<")
       << (j.contains("z_qk") // sparse: the crossover M* = Z_input^2 / Z_QK
               ? " Z_input^2/Z_QK = " +
                     sig(std::pow(j["z_input"].get<double>(), 2) / j["z_qk"].get<double>())
               : " d^2 = " + grouped(d * d))
       << "): compulsory " << sig(b["compulsory"].get<double>()) << ", leading "
       << sig(b["leading"].get<double>()) << ", max " << sig(b["asymptotic"].get<double>())
       << "; explicit " << sig(b["explicit"].get<double>()) << " words\n";
    if (!j["io"].is_null()) {
        const auto& io = j["io"];
        os << "  io       reads " << grouped(io["reads"].get<std::int64_t>()) << ", writes "
           << grouped(io["writes"].get<std::int64_t>()) << ", total "
           << grouped(io["total"].get<std::int64_t>()) << " words; peak resident "
           << grouped(io["peak_resident"].get<std::int64_t>()) << "\n           "
           << (io["matches_closed_form"].get<bool>() ? "= " : "!= ") << "io_cost_"
           << j["pass"].get<std::string>() << "_" << j["schedule"].get<std::string>()
           << (j.contains("variant") && !j["variant"].is_null()
                   ? " (" + j["variant"].get<std::string>() + " plan)"
                   : std::string())
           << " (" << grouped(io["closed_form_total"].get<std::int64_t>())
           << "); counted / bound = " << fixed(io["ratio_to_bound"].get<double>(), 3) << '\n';
        os << "           " << grouped(io["bytes"].get<std::int64_t>()) << " bytes";
        if (j["dtype"] == "bf16")
            os << " (bf16 operands at 2 bytes per word, L and statistics at 4)";
        os << '\n';
    }
    if (!j["check"].is_null())
        print_check(os, j);
}

void print_run_csv(const nlohmann::json& j) {
    std::vector<std::string> head;
    std::vector<std::string> row;
    const auto flat = [&](const std::string& key, const nlohmann::json& v) {
        head.push_back(key);
        row.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    };
    for (const auto& [key, v] : j.items()) {
        if (v.is_object()) {
            for (const auto& [sub, w] : v.items())
                flat(std::string(key).append(".").append(sub), w);
        } else {
            flat(key, v);
        }
    }
    Table t(head);
    t.add(row);
    t.print_csv(std::cout);
}

} // namespace ioattn::app
