// The batched geometric gaps of one ISA target, declared once. No include guard: the kernel
// file includes it for its own target (IOATTN_TARGET_NS = IOATTN_ISA) and random's builder
// (patterns/pattern_random.cpp) for every built target through
// <ioattn/kernels/declare_targets.inc>. The includer provides patterns/pattern_util.hpp.

namespace ioattn::sparse::detail::IOATTN_TARGET_NS {

/// patterns/geometric_gaps.cpp: gaps[k] = geometric_skip(u[k], log_keep, inverse)
/// (fast_floors.hpp), bit for bit, for the kGapBatch draws u, which are first drawn from rng
/// when it is given (random's rows), else taken as they are (tests).
void geometric_gaps(RowRng* rng, double* u, double log_keep, double inverse, double* gaps);

/// A row's next keys from one batch of gaps (geometric_gaps): key_k = key_(k-1) + gap_k + 1
/// from key_(-1) = j, written to keys while below n_k; returns how many (kGapBatch: the row
/// goes on from keys[kGapBatch - 1]; fewer: the row ends).
std::int64_t geometric_keys(RowRng* rng,
                            double* u,
                            double log_keep,
                            double inverse,
                            std::int64_t j,
                            std::int64_t n_k,
                            std::int64_t* keys);

} // namespace ioattn::sparse::detail::IOATTN_TARGET_NS
