// The inner loop of ioattn_gather_floor (gather_floor.cpp), compiled once per ISA target like the
// kernels (bench/CMakeLists.txt: ioattn_add_kernels) and called through the library's dispatch,
// since the element kernels it stands for gather with the widest vectors the CPU has. Lane-wise
// partial sums (16 per dot product), so that it vectorizes without reassociation.

#include <cmath>
#include <cstdint>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>

namespace gather_floor::IOATTN_ISA {

/// Pairs [e0, e1) of a row-major pair stream (keys: each pair's key), each pair's K and V rows
/// (64 floats) gathered and summed, or with `arithmetic` one dot product, one exp and one axpy;
/// the K and V rows of the pair `ahead` positions on are prefetched. Returns a sum of the
/// accumulator, so that nothing is optimized away.
float gather(const std::int64_t* keys,
             std::int64_t e0,
             std::int64_t e1,
             const float* k_rows,
             const float* v_rows,
             int ahead,
             bool arithmetic) {
    constexpr std::int64_t kD = 64;
    alignas(64) float acc[kD] = {};
    alignas(64) float q[kD];
    for (std::int64_t z = 0; z < kD; ++z)
        q[z] = 0.01F * static_cast<float>(z);
    for (std::int64_t e = e0; e < e1; ++e) {
        if (ahead > 0 && e + ahead < e1) {
            const std::int64_t j = keys[e + ahead];
            for (std::int64_t z = 0; z < kD; z += 16) {
                __builtin_prefetch(k_rows + j * kD + z);
                __builtin_prefetch(v_rows + j * kD + z);
            }
        }
        const float* k = k_rows + keys[e] * kD;
        const float* v = v_rows + keys[e] * kD;
        if (arithmetic) {
            alignas(64) float part[16] = {};
            for (std::int64_t z = 0; z < kD; z += 16)
                for (int l = 0; l < 16; ++l)
                    part[l] += q[z + l] * k[z + l];
            float s_qk = 0;
            for (const float x : part)
                s_qk += x;
            const float p = std::exp(s_qk * 1e-3F);
            for (std::int64_t z = 0; z < kD; ++z)
                acc[z] += p * v[z];
        } else {
            for (std::int64_t z = 0; z < kD; ++z)
                acc[z] += k[z] + v[z];
        }
    }
    float sum = 0;
    for (const float x : acc)
        sum += x;
    return sum;
}

} // namespace gather_floor::IOATTN_ISA
