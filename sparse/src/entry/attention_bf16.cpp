// ioattn::attention and friends for bf16 views (ioattn/attention.hpp, docs/design.md section
// 16): the one place the entry point meets bf16. When the native bf16 kernels run
// (bf16_kernels_native), a dense fused forward or backward goes to dense::forward or
// dense::backward on the bf16 views, and the sparse fused forward's tile and element variants
// over dense operands to their native kernels (kernels/tile/forward_fused_bf16.cpp,
// kernels/element/forward_element.cpp's bf16 instantiation). Every other call
// widens the bf16 operands (dense views: ioattn/widen.hpp; sparse operands: fp32 copies of
// their values, sharing nothing) and runs the float entry on the copies in the same arena,
// then rounds the outputs back. Plans and counts are those of the float problem. No algorithm
// lives here.

#include "kernels/kernels_bf16.hpp"
#include "plan/variant_parts.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/error.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/sparse_rows.hpp>
#include <ioattn/sparse/variants.hpp>
#include <ioattn/widen.hpp>

#include <optional>
#include <string>
#include <vector>

namespace ioattn {

namespace {

/// Structure<float> over fp32 copies of the bf16 sparse operands (the support is shared).
class WidenedStructure {
public:
    WidenedStructure(const Structure<bf16>& s, std::string_view where) {
        structure_.support = s.support;
        structure_.inputs.q = widen_rows(s.inputs.q, q_, where);
        structure_.inputs.k = widen_rows(s.inputs.k, k_, where);
        structure_.inputs.v = widen_rows(s.inputs.v, v_, where);
    }

    WidenedStructure(const WidenedStructure&) = delete;
    WidenedStructure& operator=(const WidenedStructure&) = delete;

    [[nodiscard]] const Structure<float>& get() const { return structure_; }

private:
    static const sparse::SparseRows<float>*
    widen_rows(const sparse::SparseRows<bf16>* x,
               std::optional<sparse::SparseRows<float>>& keep,
               std::string_view where) {
        if (x == nullptr)
            return nullptr;
        const auto nnz = static_cast<std::size_t>(x->nonzeros());
        // the copy: offsets and indices (8 bytes each) and fp32 values
        require_memory(where,
                       bytes_of(static_cast<std::int64_t>(2 * nnz) + x->rows() + 1, 8) +
                           bytes_of(x->nonzeros(), sizeof(float)),
                       "an fp32 copy of a bf16 sparse operand");
        std::vector<float> values(nnz);
        widen(x->values().data(), values.data(), x->nonzeros());
        keep.emplace(x->rows(),
                     x->cols(),
                     std::vector<std::int64_t>(x->offsets().begin(), x->offsets().end()),
                     std::vector<std::int64_t>(x->indices().begin(), x->indices().end()),
                     std::move(values));
        return &*keep;
    }

    Structure<float> structure_;
    std::optional<sparse::SparseRows<float>> q_, k_, v_;
};

bool has_sparse_operand(const Structure<bf16>& s) {
    return s.inputs.q != nullptr || s.inputs.k != nullptr || s.inputs.v != nullptr;
}

/// Whether the native bf16 kernels run `plan` (ioattn/isa.hpp: bf16_kernels_native): the
/// dense fused forward or backward, whose bf16 views go to dense::forward or dense::backward
/// as they are, or the sparse fused forward's tile variant over dense operands (a plan of the
/// variant planner's tile variant, or of the fused kernel itself), whose views go to
/// forward_fused_bf16, or its element variant, whose views go to forward_element; all without
/// fp32 copies. (The split and permuted variants widen.)
bool runs_native(const AttentionPlan& plan, const Structure<bf16>& s, Pass pass) {
    if (plan.pass != pass || plan.schedule != Schedule::fused || has_sparse_operand(s) ||
        !bf16_kernels_native())
        return false;
    if (!plan.sparse)
        return !plan.variants && s.support == nullptr;
    return pass == Pass::forward && s.support != nullptr &&
           (!plan.variants || plan.variants->variant == sparse::Variant::tile ||
            plan.variants->variant == sparse::Variant::element);
}

template <typename Counter>
void run_kernel(const ForwardArgs<bf16>& a,
                const Structure<bf16>& s,
                const AttentionPlan& plan,
                Counter& counter) {
    if (!plan.sparse) {
        dense::forward(a, plan.tiling, plan.memory, counter);
        return;
    }
#if defined(IOATTN_BUILT_AVX512BF16) // the native kernels' build (not a single-ISA one)
    // the native kernel: its own dry run counts, its timed run computes. Without a variant
    // plan the fused kernel runs over the support; with one (tile or element variant: one
    // part holds every pair), the kernel of the part with pairs, as forward_split runs it.
    if (!plan.variants) {
        kernels::counted(counter, [&](auto& c) {
            sparse::isa_avx512bf16::forward_fused_bf16(a, *s.support, plan.tiling, plan.memory, c);
        });
        return;
    }
    const sparse::VariantPlan& vp = *plan.variants;
    const sparse::detail::PartsView parts = sparse::detail::view_of(
        sparse::detail::parts_of(vp, Pass::forward, "ioattn::attention"), *s.support);
    kernels::counted(counter, [&](auto& c) {
        if (parts.element.z_qk() > 0)
            sparse::isa_avx512bf16::forward_element(
                a, parts.element, vp.element, plan.memory, c, false);
        else
            sparse::isa_avx512bf16::forward_fused_bf16(a, parts.tile, plan.tiling, plan.memory, c);
    });
#else
    (void)a, (void)s, (void)counter; // runs_native is false without the kernel
    throw Error("ioattn::attention: the native bf16 kernels are not built");
#endif
}

template <typename Counter>
void run_kernel(const BackwardArgs<bf16>& a,
                const Structure<bf16>&,
                const AttentionPlan& plan,
                Counter& counter) {
    dense::backward(a, plan.tiling, plan.memory, counter);
}

/// The plan run by the native kernel, as the float entry runs a plan (attention.cpp): views
/// checked naming the caller, counted if asked, in the arena of options.threads.
template <typename Args>
AttentionReport run_native(const Args& args,
                           const Structure<bf16>& s,
                           const AttentionPlan& plan,
                           const AttentionOptions& o) {
    const std::string where(o.where);
    Args a = args;
    a.validate(where);
    if (!(plan.problem == a.problem) || plan.sparse != s.sparse())
        throw InvalidArgument(where + ": the plan was made for another problem, pass or "
                                      "structure than these views");
    AttentionReport report{plan, std::nullopt, std::nullopt};
    if (!o.count_io && o.counter == nullptr) {
        NullCounter c;
        with_threads(o.threads, [&] { run_kernel(a, s, plan, c); });
        return report;
    }
    IoCounter local(plan.memory.fast_words);
    IoCounter& c = o.counter != nullptr ? *o.counter : local;
    with_threads(o.threads, [&] { run_kernel(a, s, plan, c); });
    report.io = c.report();
    Structure<float> s32; // no sparse operands: the support alone
    s32.support = s.support;
    report.closed_form = io_cost<float>(plan, s32);
    return report;
}

/// Widens, runs `run(float args, float structure)` in the arena of options.threads, narrows.
template <typename Widened, typename Args, typename Run>
AttentionReport
widened(const Args& args, const Structure<bf16>& s, const AttentionOptions& o, const Run& run) {
    const std::string where(o.where);
    const WidenedStructure ws(s, where);
    return with_threads(o.threads, [&] {
        const Widened w(args, where, has_sparse_operand(s));
        AttentionReport report = run(w.args(), ws.get());
        w.narrow();
        return report;
    });
}

} // namespace

bool bf16_runs_native(const AttentionPlan& plan, const Structure<bf16>& structure) {
    return runs_native(plan, structure, plan.pass);
}

template <>
AttentionPlan plan_attention<bf16>(const Problem& problem,
                                   Pass pass,
                                   const Structure<bf16>& structure,
                                   const AttentionOptions& options) {
    const WidenedStructure ws(structure, options.where);
    return plan_attention<float>(problem, pass, ws.get(), options);
}

template <>
IoReport io_cost<bf16>(const AttentionPlan& plan, const Structure<bf16>& structure) {
    const WidenedStructure ws(structure, "ioattn::io_cost");
    return io_cost<float>(plan, ws.get());
}

template <>
AttentionReport attention<bf16>(const ForwardArgs<bf16>& args,
                                const Structure<bf16>& structure,
                                const AttentionPlan& plan,
                                const AttentionOptions& options) {
    if (runs_native(plan, structure, Pass::forward))
        return run_native(args, structure, plan, options);
    return widened<WidenedForward>(
        args, structure, options, [&](const ForwardArgs<float>& a, const Structure<float>& s) {
            return attention<float>(a, s, plan, options);
        });
}

template <>
AttentionReport attention<bf16>(const ForwardArgs<bf16>& args,
                                const Structure<bf16>& structure,
                                const AttentionOptions& options) {
    if (!has_sparse_operand(structure) && bf16_kernels_native()) // native or widened, planned once
        return attention<bf16>(
            args,
            structure,
            plan_attention<bf16>(args.problem, Pass::forward, structure, options),
            options);
    return widened<WidenedForward>(
        args, structure, options, [&](const ForwardArgs<float>& a, const Structure<float>& s) {
            return attention<float>(a, s, options);
        });
}

template <>
AttentionReport attention_backward<bf16>(const BackwardArgs<bf16>& args,
                                         const Structure<bf16>& structure,
                                         const AttentionOptions& options) {
    if (structure.support == nullptr && !has_sparse_operand(structure) &&
        bf16_kernels_native()) { // a dense plan, O(1)
        const AttentionPlan plan =
            plan_attention<bf16>(args.problem, Pass::backward, structure, options);
        if (runs_native(plan, structure, Pass::backward))
            return run_native(args, structure, plan, options);
    }
    return widened<WidenedBackward>(
        args, structure, options, [&](const BackwardArgs<float>& a, const Structure<float>& s) {
            return attention_backward<float>(a, s, options);
        });
}

template <>
AttentionReport attention_backward<bf16>(const BackwardArgs<bf16>& args,
                                         const Structure<bf16>& structure,
                                         const AttentionPlan& plan,
                                         const AttentionOptions& options) {
    if (runs_native(plan, structure, Pass::backward))
        return run_native(args, structure, plan, options);
    return widened<WidenedBackward>(
        args, structure, options, [&](const BackwardArgs<float>& a, const Structure<float>& s) {
            return attention_backward<float>(a, s, plan, options);
        });
}

template <>
AttentionReport io_count<bf16>(const Problem& problem,
                               Pass pass,
                               const Structure<bf16>& structure,
                               const AttentionOptions& options) {
    const WidenedStructure ws(structure, options.where);
    return io_count<float>(problem, pass, ws.get(), options);
}

} // namespace ioattn
