#pragma once
// One run of decode attention over a key/value cache (ioattn/decode.hpp) on seeded values, as
// `ioattn decode` (cmd_decode.cpp) and the demo's decode part (demo_decode.cpp) run it: times
// `repeat` calls, sets the cached bytes per second beside the memory's read bandwidth measured
// in the same run, and optionally counts the I/O and checks every sequence against
// ioattn::attention in double.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ioattn::app {

/// What to run: the shape, the cache's layout and type, and what to measure.
struct DecodeSetup {
    std::int64_t heads = 32;
    std::int64_t kv_heads = 8;
    std::int64_t d = 128;
    std::vector<std::int64_t> kv_lens; ///< one cached length per sequence
    std::int64_t new_tokens = 1;
    std::int64_t page_size = 0;     ///< 0: contiguous
    std::int64_t chunk = 0;         ///< 0: the library's
    std::int64_t window = 0;        ///< DecodeArgs::window (0: none)
    std::string pattern = "causal"; ///< DecodeArgs::pattern, with the data's seed
    std::string dtype = "float";    ///< the cache's: float, double or bf16
    bool check = false;
    bool count_io = false;
    int repeat = 10;
    int threads = 0;
    std::uint64_t seed = 42;
    std::int64_t bandwidth_bytes = std::int64_t{512} << 20; ///< 0: no bandwidth measurement
};

/// The run's results as `ioattn decode --json` prints them: the shape, "seconds" (median),
/// "seconds_min", "seconds_max", "kv_bytes", "gbps", "bandwidth_gbs", "bandwidth_ratio", "io"
/// (with count_io; CheckFailed if it differs from the closed form) and "check" (with check:
/// "passed", "max_abs_error", "attention_error"). Library errors propagate.
nlohmann::json run_decode(const DecodeSetup& setup);

} // namespace ioattn::app
