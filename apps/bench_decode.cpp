// ioattn bench --suite decode (bench_decode.hpp): H = 32 over H_kv = 8, d = 128, one new token,
// the rows of README.md's Decode table: B = 1 with n_k = 65536, fp32 and bf16 caches (bf16
// reads half the bytes), and B = 8 with ragged lengths from 1,024 to 32,768 over a paged fp32
// cache of 16-row and 128-row blocks. Each row runs decode_run.cpp (median, min and max of
// --repeat calls after a warm-up) and measures the read bandwidth beside it in the same run;
// the table sets the cached bytes per second against it.

#include "bench_decode.hpp"

#include "decode_run.hpp"
#include "output.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace ioattn::app {

namespace {

struct DecodeRow {
    const char* what;
    const char* dtype;
    std::int64_t page_size;
    bool ragged;
};

constexpr DecodeRow kDecodeRows[] = {{"B=1 contiguous", "float", 0, false},
                                     {"B=1 contiguous", "bf16", 0, false},
                                     {"B=8 ragged, paged 16", "float", 16, true},
                                     {"B=8 ragged, paged 128", "float", 128, true}};

std::vector<std::int64_t> decode_lengths(bool ragged, bool quick) {
    const std::int64_t div = quick ? 4 : 1;
    if (!ragged)
        return {65536 / div};
    std::vector<std::int64_t> l = {1024, 32768, 4096, 16384, 2048, 8192, 24576, 12288};
    for (std::int64_t& x : l)
        x /= div;
    return l;
}

} // namespace

void run_decode_suite(const DecodeSuiteOptions& o) {
    nlohmann::json rows = nlohmann::json::array();
    for (const DecodeRow& r : kDecodeRows) {
        DecodeSetup s;
        s.kv_lens = decode_lengths(r.ragged, o.quick);
        s.page_size = r.page_size;
        s.dtype = r.dtype;
        s.repeat = o.repeat;
        s.threads = o.threads;
        s.seed = o.seed;
        nlohmann::json j = run_decode(s);
        j["what"] = r.what;
        rows.push_back(j);
    }
    if (o.json) {
        std::cout << nlohmann::json{{"suite", "decode"}, {"rows", rows}}.dump(2) << '\n';
        return;
    }
    Table t({"decode (H=32/8, d=128, 1 token)",
             "cache",
             "ms median",
             "min-max",
             "GB/s",
             "read bandwidth GB/s",
             "ratio"});
    for (const nlohmann::json& j : rows)
        t.add({j["what"].get<std::string>(),
               j["dtype"].get<std::string>() == "bf16" ? "bf16" : "fp32",
               fixed(j["seconds"].get<double>() * 1e3, 2),
               fixed(j["seconds_min"].get<double>() * 1e3, 2) + "-" +
                   fixed(j["seconds_max"].get<double>() * 1e3, 2),
               fixed(j["gbps"].get<double>(), 1),
               fixed(j["bandwidth_gbs"].get<double>(), 1),
               fixed(j["bandwidth_ratio"].get<double>(), 2)});
    if (o.csv) {
        t.print_csv(std::cout);
        return;
    }
    std::cout << "ioattn bench --suite decode: " << o.threads << " threads, median of " << o.repeat
              << "; the read bandwidth measured beside each row\n";
    t.print(std::cout);
}

} // namespace ioattn::app
