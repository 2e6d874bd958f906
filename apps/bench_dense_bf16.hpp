#pragma once
// The bf16 rows of `ioattn bench --suite dense` (bench_dense_bf16.cpp): the dense fused forward
// on the suite's inputs rounded to bf16, against the fp32 fused row of the same shape and the
// measured bf16 dot-product peak (measure_bf16_dot_peak).

#include <ioattn/attention.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

struct Bf16Row {
    std::int64_t n = 0;
    std::int64_t d = 0;
    std::string tiling;
    std::string kernels; ///< "native" or "widened" (bf16_kernels_native)
    double seconds = 0;
    double gflops = 0;
    double x_fp32 = 0; ///< fp32 fused seconds / these seconds
    double x_peak = 0; ///< GFLOP/s / the bf16 dot peak (0: no peak on this machine)
};

/// The bf16 dot-product peak on `threads` workers, 0 where the library or CPU has none.
double bf16_peak_or_zero(int threads);

/// Times the bf16 fused forward of `data` (rounded to bf16) planned as `options` plan it,
/// median of `repeat` runs after a warm-up.
Bf16Row bench_bf16_forward(const measure::ForwardData<float>& data,
                           const AttentionOptions& options,
                           int repeat,
                           double fp32_seconds,
                           double peak);

/// The rows as a table below the suite's (text) or as JSON.
void print_bf16_rows(std::ostream& out, const std::vector<Bf16Row>& rows, double peak);
nlohmann::json bf16_rows_json(const std::vector<Bf16Row>& rows, double peak);

} // namespace ioattn::app
