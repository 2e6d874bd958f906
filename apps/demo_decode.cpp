// The decode step in `ioattn demo` (demo.hpp): 6. a ragged batch (one sequence empty) over a
// paged fp32 cache of 16-row blocks, checked against ioattn::attention in double, its counted
// I/O against the closed form and the lower bound, and timed against the read bandwidth
// measured in the same run (on a buffer near the cache's size, so the part stays short).

#include "decode_run.hpp"
#include "demo.hpp"
#include "output.hpp"

#include <cstdint>
#include <iostream>
#include <string>

namespace ioattn::app {

nlohmann::json demo_decode(const DemoOptions& o, bool text) {
    DecodeSetup s;
    s.heads = 32;
    s.kv_heads = 8;
    s.d = 128;
    s.kv_lens = {4096, 1024, 0, 2048};
    s.page_size = 16;
    s.check = true;
    s.count_io = true;
    s.repeat = 5;
    s.threads = o.threads;
    s.seed = o.seed;
    s.bandwidth_bytes = std::int64_t{64} << 20;
    nlohmann::json part = run_decode(s);
    const bool checked = part.at("check").at("passed").get<bool>();
    const bool exact = part.at("io").at("agrees").get<bool>();
    part["passed"] = checked && exact;
    if (!text)
        return part;
    const auto& check = part.at("check");
    const auto& io = part.at("io");
    std::cout << "B = 4 (lengths 4096, 1024, 0, 2048), H = 32 / H_kv = 8, d = 128, one new token, "
                 "paged fp32 cache of 16-row blocks:\n"
              << "check " << (checked ? "passed" : "FAILED") << " (max |error| "
              << sig(check.at("max_abs_error").get<double>()) << ", ioattn::attention in float "
              << sig(check.at("attention_error").get<double>()) << "); counted I/O = closed form "
              << (exact ? "yes" : "NO") << ", "
              << fixed(io.at("ratio_to_lower_bound").get<double>(), 4) << "x the lower bound\n"
              << grouped(part.at("kv_bytes").get<std::int64_t>()) << " cached bytes in "
              << fixed(part.at("seconds").get<double>() * 1e3, 2)
              << " ms (median of 5) = " << fixed(part.at("gbps").get<double>(), 1) << " GB/s, "
              << fixed(part.at("bandwidth_ratio").get<double>(), 2)
              << "x the read bandwidth measured now ("
              << fixed(part.at("bandwidth_gbs").get<double>(), 1) << " GB/s)\n";
    return part;
}

} // namespace ioattn::app
