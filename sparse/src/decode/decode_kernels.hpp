// The decode chunk kernel of one ISA target, declared once. No include guard: the kernel file
// includes it for its own target (IOATTN_TARGET_NS = IOATTN_ISA) and the entry point
// (decode/decode.cpp) for every built target through <ioattn/kernels/declare_targets.inc>.
// The includer provides ioattn/decode.hpp.

namespace ioattn::sparse::IOATTN_TARGET_NS {

/// decode/decode_chunks.cpp: every (sequence, kv head, chunk) of the plan. A sequence of one
/// chunk writes args.o and args.lse; the chunks of a longer one write their partial states
/// (R rows of d_v + 2 words: O unnormalized, m, l; base 2) to partials at their task's slot,
/// which decode_merge combines. partials may be null in a dry run.
template <typename Scalar, typename Cache, typename Counter>
void decode_chunks(const DecodeArgs<Scalar, Cache>& args,
                   const DecodePlan& plan,
                   Scalar* partials,
                   Counter& counter);

} // namespace ioattn::sparse::IOATTN_TARGET_NS
