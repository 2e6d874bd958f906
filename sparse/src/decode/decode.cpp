// ioattn::decode and plan_decode: validate once, cut the sequences into chunks, run the chunk
// phase (decode/decode_chunks.cpp, the copy of the active ISA target) and the merge
// (decode/decode_merge.cpp) in one task arena, and report the counted I/O beside its closed
// form. A counted call is the dry run (baseline target) then the timed run (kernels::counted).

#include "decode/decode_detail.hpp"
#include "fail.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/fp16.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#define IOATTN_TARGET_DECLARATIONS "decode/decode_kernels.hpp"
#include <ioattn/kernels/declare_targets.inc>
#if defined(IOATTN_BUILT_AVX512BF16) && !defined(IOATTN_SINGLE_ISA)
#define IOATTN_TARGET_NS isa_avx512bf16 // its decode_chunks<float, bf16, NullCounter>
#include "decode/decode_kernels.hpp"
#undef IOATTN_TARGET_NS
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ioattn {

namespace {

#if defined(IOATTN_BUILT_AVX512BF16) && !defined(IOATTN_SINGLE_ISA)
/// Whether every word of the queries is a bf16 value (its low 16 bits zero): then the
/// avx512bf16 target's chunk kernel multiplies them in bf16 with nothing rounded.
bool decode_q_in_bf16(const TensorView<const float>& q, const DecodeShape& s) {
    for (std::int64_t b = 0; b < s.batch; ++b)
        for (std::int64_t h = 0; h < s.heads; ++h)
            for (std::int64_t i = 0; i < s.n_new; ++i) {
                const float* row = q.row(b, h, i);
                for (std::int64_t x = 0; x < s.d; ++x)
                    if ((std::bit_cast<std::uint32_t>(row[x]) & 0xFFFFU) != 0)
                        return false;
            }
    return true;
}
#endif

template <typename Scalar, typename Cache, typename Counter>
void run_chunks(const DecodeArgs<Scalar, Cache>& args,
                const DecodePlan& plan,
                Scalar* partials,
                Counter& counter) {
    using namespace sparse; // the targets' namespaces
#if defined(IOATTN_BUILT_AVX512BF16) && !defined(IOATTN_SINGLE_ISA)
    // a bf16 cache and queries exact in bf16: S = Q K^T on the bf16 words (vdpbf16ps), 1.16x
    // in L3 (decode_chunks.cpp)
    if constexpr (std::is_same_v<Scalar, float> && std::is_same_v<Cache, bf16> &&
                  std::is_same_v<Counter, NullCounter>)
        if (bf16_kernels_native() && decode_q_in_bf16(args.q, plan.shape))
            return isa_avx512bf16::decode_chunks<float, bf16, NullCounter>(
                args, plan, partials, counter);
#endif
    IOATTN_DISPATCH(Counter, decode_chunks<Scalar, Cache, Counter>(args, plan, partials, counter));
}

/// Sequence b's visible rows under s.pattern: decode_pattern_rows' keys, their union the
/// positions (merged, no array of len words: a window of 4096 in a cache of 65536 costs its
/// 4096), each token's keys as indices into them.
DecodeRows pattern_rows(const DecodeShape& s, std::int64_t len, std::string_view where) {
    const sparse::Support seen =
        decode_pattern_rows(s.pattern, s.n_new, len, s.pattern_seed, where);
    DecodeRows r;
    for (std::int64_t t = 0; t < s.n_new; ++t) { // rows sorted: a merge of each into the union
        const auto row = seen.row(t);
        std::vector<std::int64_t> merged;
        merged.reserve(r.positions.size() + row.size());
        std::set_union(r.positions.begin(),
                       r.positions.end(),
                       row.begin(),
                       row.end(),
                       std::back_inserter(merged));
        r.positions = std::move(merged);
    }
    r.indptr.push_back(0);
    for (std::int64_t t = 0; t < s.n_new; ++t) {
        auto at = r.positions.begin();
        for (const std::int64_t j : seen.row(t)) {
            at = std::lower_bound(at, r.positions.end(), j);
            r.index.push_back(at - r.positions.begin());
        }
        r.indptr.push_back(static_cast<std::int64_t>(r.index.size()));
    }
    return r;
}

} // namespace

std::int64_t DecodePlan::first_row(std::int64_t b) const {
    const std::int64_t len = shape.kv_lens[static_cast<std::size_t>(b)];
    if (!rows.empty()) {
        const auto& at = rows[static_cast<std::size_t>(b)].positions;
        return at.empty() ? len : at.front();
    }
    if (shape.window == 0 || len == 0)
        return 0;
    return std::max<std::int64_t>(0, len - shape.n_new + 1 - shape.window);
}

std::int64_t DecodePlan::visible_rows(std::int64_t b) const {
    if (!rows.empty())
        return static_cast<std::int64_t>(rows[static_cast<std::size_t>(b)].positions.size());
    return shape.kv_lens[static_cast<std::size_t>(b)] - first_row(b);
}

std::int64_t DecodePlan::kv_rows() const {
    std::int64_t n = 0;
    for (std::int64_t b = 0; b < shape.batch; ++b)
        n += visible_rows(b);
    return n;
}

DecodePlan plan_decode(const DecodeShape& shape, const DecodeOptions& options) {
    using sparse::detail::fail;
    const std::string_view where = options.where;
    DecodePlan plan;
    plan.shape = shape;
    DecodeShape& s = plan.shape;
    if (s.d_v == 0)
        s.d_v = s.d;
    if (s.batch < 1 || s.heads < 1 || s.d < 1 || s.d_v < 1)
        fail(where,
             "batch = ",
             s.batch,
             ", heads = ",
             s.heads,
             ", d = ",
             s.d,
             ", d_v = ",
             s.d_v,
             " (expected >= 1)");
    if (s.kv_heads < 1 || s.heads % s.kv_heads != 0)
        fail(where, "heads = ", s.heads, " is not a multiple of kv_heads = ", s.kv_heads);
    if (s.n_new < 1 || s.n_new > kDecodeMaxNew)
        fail(where, "n_new = ", s.n_new, " (expected 1 to ", kDecodeMaxNew, ")");
    if (static_cast<std::int64_t>(s.kv_lens.size()) != s.batch)
        fail(where, s.kv_lens.size(), " lengths for a batch of ", s.batch);
    if (s.window < 0)
        fail(where, "window = ", s.window, " (expected >= 0; 0: no window)");
    sparse::detail::resolve_window_spec(s, where);
    if (options.chunk != 0 &&
        (options.chunk < kDecodeChunkStep || options.chunk % kDecodeChunkStep != 0))
        fail(where,
             "chunk = ",
             options.chunk,
             " (expected a positive multiple of ",
             kDecodeChunkStep,
             ")");
    std::int64_t longest = 0; // the most visible rows of a sequence
    for (std::int64_t b = 0; b < s.batch; ++b) {
        const std::int64_t len = s.kv_lens[static_cast<std::size_t>(b)];
        if (len < 0)
            fail(where, "kv_lens[", b, "] = ", len, " (expected >= 0)");
        if (len > 0 && len < s.n_new)
            fail(where,
                 "kv_lens[",
                 b,
                 "] = ",
                 len,
                 " is less than n_new = ",
                 s.n_new,
                 " (the new tokens are the last positions of their sequence)");
        if (!s.pattern.empty())
            plan.rows.push_back(len == 0 ? DecodeRows{{},
                                                      std::vector<std::int64_t>(
                                                          static_cast<std::size_t>(s.n_new) + 1, 0),
                                                      {}}
                                         : pattern_rows(s, len, where));
        longest = std::max(longest, plan.visible_rows(b));
    }
    plan.chunk = options.chunk == 0 ? default_decode_chunk(longest) : options.chunk;
    plan.first_chunk.assign(static_cast<std::size_t>(s.batch) + 1, 0);
    for (std::int64_t b = 0; b < s.batch; ++b)
        plan.first_chunk[static_cast<std::size_t>(b) + 1] =
            plan.first_chunk[static_cast<std::size_t>(b)] +
            (plan.visible_rows(b) + plan.chunk - 1) / plan.chunk;
    plan.scale = 1.0 / std::sqrt(static_cast<double>(s.d));
    plan.memory = options.memory.value_or(
        MemoryModel::per_core_l2(s.word_bytes_cache > 0 ? s.word_bytes_cache : 4));
    return plan;
}

template <typename Scalar, typename Cache>
DecodeReport decode(const DecodeArgs<Scalar, Cache>& args, const DecodeOptions& options) {
    using sparse::detail::fail;
    const bool dry = options.dry_run;
    DecodeShape shape = sparse::detail::validate_decode(args, options.where, dry);
    if (shape.word_bytes_cache == 0)
        shape.word_bytes_cache = static_cast<std::int64_t>(sizeof(Cache));
    DecodeReport report;
    DecodeOptions opts = options;
    if (!opts.memory)
        opts.memory = MemoryModel::per_core_l2(static_cast<std::int64_t>(sizeof(Scalar)));
    report.plan = plan_decode(shape, opts);
    DecodePlan& plan = report.plan;
    if (args.scale != 0.0) {
        if (!std::isfinite(args.scale) || args.scale < 0.0)
            fail(
                options.where, "scale = ", args.scale, " (expected finite and >= 0; 0: 1/sqrt(d))");
        plan.scale = args.scale;
    }
    const std::int64_t part_words = sparse::detail::decode_partial_words(plan);
    const auto run = [&](auto& counter) {
        using C = std::remove_reference_t<decltype(counter)>;
        const std::int64_t slots = C::kComputes ? plan.tasks() : 0;
        const kernels::Workspace<Scalar> partials(1, slots * part_words, false);
        Scalar* p = slots > 0 ? partials.slab(0) : nullptr;
        run_chunks(args, plan, p, counter);
        sparse::detail::decode_merge(args.o, args.lse, plan, p, counter);
    };
    with_threads(options.threads, [&] {
        if (dry) {
            DryRunCounter counter(plan.memory.fast_words);
            run(counter);
            report.io = counter.report();
        } else if (options.count_io) {
            IoCounter counter(plan.memory.fast_words);
            kernels::counted(counter, run);
            report.io = counter.report();
        } else {
            NullCounter counter;
            run(counter);
        }
    });
    if (report.io)
        report.closed_form = io_cost_decode(plan);
    return report;
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template DecodeReport decode<Scalar, Scalar>(const DecodeArgs<Scalar, Scalar>&,                \
                                                 const DecodeOptions&);                            \
    template DecodeReport decode<Scalar, bf16>(const DecodeArgs<Scalar, bf16>&,                    \
                                               const DecodeOptions&);                              \
    template DecodeReport decode<Scalar, fp16>(const DecodeArgs<Scalar, fp16>&,                    \
                                               const DecodeOptions&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn
