// Fuzz target: ioattn::sparse::parse_pattern on arbitrary spec strings, for n_q, n_k in
// [0, 48] and a seed from the input's first bytes. Every spec either throws InvalidArgument
// or yields an n_q x n_k support, the same on a second parse (seeded terms are deterministic).
// Specs naming `file:` are skipped: the Matrix Market reader has its own target, and a fuzzer
// must not open arbitrary paths. Seeds: tests/fuzz/corpus/parse_pattern_fuzz.

#include "fuzz_util.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    ioattn::fuzz::init();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace sp = ioattn::sparse;
    FuzzedDataProvider in(data, size);
    const auto n_q = in.ConsumeIntegralInRange<std::int64_t>(0, 48);
    const auto n_k = in.ConsumeIntegralInRange<std::int64_t>(0, 48);
    const auto seed = in.ConsumeIntegral<std::uint8_t>();
    const std::string spec = in.ConsumeRemainingBytesAsString();
    if (spec.find("file") != std::string::npos)
        return 0;
    sp::Support s;
    try {
        s = sp::parse_pattern(spec, n_q, n_k, seed);
    } catch (const ioattn::InvalidArgument&) {
        return 0;
    }
    FUZZ_CHECK(s.n_q() == n_q && s.n_k() == n_k);
    FUZZ_CHECK(sp::parse_pattern(spec, n_q, n_k, seed) == s);
    return 0;
}
