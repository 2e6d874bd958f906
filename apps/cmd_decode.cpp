// ioattn decode: decode attention over a key/value cache (ioattn/decode.hpp). Reads the batch of
// sequences and their cached lengths (--kv-len or --kv-lens), the layout (--page-size), the
// cache type (--dtype) and a pattern over the cached positions (--pattern: a sliding window or
// any other spec),
// runs it (decode_run.cpp: timed calls against the read bandwidth measured in the same run,
// --check against ioattn::attention in double, --count-io against the closed form and the
// lower bound) and prints the result as text or JSON.

#include "commands.hpp"
#include "decode_run.hpp"
#include "output.hpp"

#include <ioattn/decode.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace ioattn::app {

namespace {

constexpr const char* kDecodeWhere = "decode";

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
    std::string pattern = "causal";
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
            throw UsageError(std::string(kDecodeWhere) + ": --kv-lens '" + o.kv_lens +
                             "' is not a comma-separated list of lengths");
        lens.push_back(v);
    }
    if (static_cast<std::int64_t>(lens.size()) != o.batch && o.batch != 1)
        throw UsageError(std::string(kDecodeWhere) + ": --kv-lens has " +
                         std::to_string(lens.size()) + " lengths but --batch is " +
                         std::to_string(o.batch));
    return lens;
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
              << (j["window"].get<std::int64_t>() > 0
                      ? ", window of " + std::to_string(j["window"].get<std::int64_t>()) + " keys"
                      : "")
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
    cmd->add_option(
           "--dtype",
           o->dtype,
           "Cache type: float, double, bf16 or fp16 (IEEE half); bf16 queries are bf16 values")
        ->check(CLI::IsMember({"float", "double", "bf16", "fp16"}))
        ->capture_default_str();
    cmd->add_flag("--check", o->check, "Compare with ioattn::attention in double");
    cmd->add_flag("--count-io", o->count_io, "Count the I/O against the closed form and bound");
    cmd->add_option("--repeat", o->repeat, "Timed calls (median, min, max)")->capture_default_str();
    cmd->add_option("--threads", o->threads, "Threads (0: every core)")->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the data")->capture_default_str();
    cmd->add_flag("--no-bandwidth", o->no_bandwidth, "Skip the read-bandwidth measurement");
    cmd->add_flag("--json", o->json, "JSON output");
    cmd->add_option("--pattern",
                    o->pattern,
                    "Pattern over the cached positions: causal (every earlier position), "
                    "causal-window:W or window:W (the W + 1 latest), or any spec of run "
                    "--pattern, built per sequence on its new-tokens x length problem with "
                    "--seed and kept causal (only the rows some token sees are read)")
        ->capture_default_str();
    cmd->callback([o] {
        if (!o->kv_lens.empty() && o->batch == 1)
            o->batch = static_cast<std::int64_t>(lengths_of(*o).size());
        if (o->batch < 1 || o->heads < 1 || o->kv_heads < 1 || o->d < 1 || o->page_size < 0)
            throw UsageError(
                std::string(kDecodeWhere) +
                ": --batch, --heads, --kv-heads, --d must be >= 1 and --page-size >= 0");
        DecodeSetup s;
        s.heads = o->heads;
        s.kv_heads = o->kv_heads;
        s.d = o->d;
        s.kv_lens = lengths_of(*o);
        s.new_tokens = o->new_tokens;
        s.page_size = o->page_size;
        s.chunk = o->chunk;
        try { // a spec the grammar rejects is a usage error (its shape checks come later)
            (void)ioattn::decode_pattern_rows(o->pattern, 1, 1, o->seed, kDecodeWhere);
        } catch (const ioattn::InvalidArgument& e) {
            throw UsageError(e.what());
        }
        s.pattern = o->pattern; // windows become DecodeArgs::window in the library
        s.dtype = o->dtype;
        s.check = o->check;
        s.count_io = o->count_io;
        s.repeat = o->repeat;
        s.threads = o->threads;
        s.seed = o->seed;
        if (o->no_bandwidth)
            s.bandwidth_bytes = 0;
        const nlohmann::json j = run_decode(s);
        if (o->json)
            std::cout << j.dump(2) << "\n";
        else
            print_text(j);
        if (j.contains("check") && !j["check"]["passed"].get<bool>())
            throw CheckFailed(std::string(kDecodeWhere) + ": check failed");
    });
}
