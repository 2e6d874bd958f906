// Fuzz target: ioattn::sparse::read_matrix_market on arbitrary file contents. Every input
// either throws ioattn::Error or yields a Support that survives a write/read round trip
// unchanged. Seeds: tests/fuzz/corpus/matrix_market_fuzz.

#include "fuzz_util.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/matrix_market.hpp>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    ioattn::fuzz::init();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace sp = ioattn::sparse;
    const std::string path = ioattn::fuzz::write_scratch("input.mtx", data, size);
    sp::Support s;
    try {
        s = sp::read_matrix_market(path);
    } catch (const ioattn::Error&) {
        return 0; // rejected with a message: fine
    }
    const std::string copy = (ioattn::fuzz::scratch_dir() / "copy.mtx").string();
    sp::write_matrix_market(copy, s);
    const sp::Support back = sp::read_matrix_market(copy);
    FUZZ_CHECK(back == s);
    std::int64_t seen = 0;
    for (std::int64_t i = 0; i < s.n_q(); ++i)
        seen += s.row_nonzeros(i);
    FUZZ_CHECK(seen == s.z_qk());
    return 0;
}
