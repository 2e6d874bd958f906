// ioattn::attention and friends for bf16 views (ioattn/attention.hpp, docs/design.md section
// 16): the one place the entry point meets bf16. A dense fused forward or backward goes to
// dense::forward or dense::backward on the bf16 views when the native bf16 kernels run
// (bf16_kernels_native). Every other call
// widens the bf16 operands (dense views: ioattn/widen.hpp; sparse operands: fp32 copies of
// their values, sharing nothing) and runs the float entry on the copies in the same arena,
// then rounds the outputs back. Plans and counts are those of the float problem. No algorithm
// lives here.

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/error.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/sparse_rows.hpp>
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

/// Whether `plan` is the dense fused forward or backward and the native bf16 kernels run it:
/// then the bf16 views go to dense::forward or dense::backward as they are, without fp32 copies
/// (ioattn/isa.hpp: bf16_kernels_native).
bool runs_native(const AttentionPlan& plan, const Structure<bf16>& s, Pass pass) {
    return plan.pass == pass && plan.schedule == Schedule::fused && !plan.sparse &&
           !plan.variants && s.support == nullptr && !has_sparse_operand(s) &&
           bf16_kernels_native();
}

void run_dense(const ForwardArgs<bf16>& a, const AttentionPlan& plan, auto& counter) {
    dense::forward(a, plan.tiling, plan.memory, counter);
}

void run_dense(const BackwardArgs<bf16>& a, const AttentionPlan& plan, auto& counter) {
    dense::backward(a, plan.tiling, plan.memory, counter);
}

/// The plan run by the native kernel, as the float entry runs a plan (attention.cpp): views
/// checked naming the caller, counted if asked, in the arena of options.threads.
template <typename Args>
AttentionReport run_native(const Args& args, const AttentionPlan& plan, const AttentionOptions& o) {
    const std::string where(o.where);
    Args a = args;
    a.validate(where);
    if (!(plan.problem == a.problem))
        throw InvalidArgument(where + ": the plan was made for another problem, pass or "
                                      "structure than these views");
    AttentionReport report{plan, std::nullopt, std::nullopt};
    if (!o.count_io && o.counter == nullptr) {
        NullCounter c;
        with_threads(o.threads, [&] { run_dense(a, plan, c); });
        return report;
    }
    IoCounter local(plan.memory.fast_words);
    IoCounter& c = o.counter != nullptr ? *o.counter : local;
    with_threads(o.threads, [&] { run_dense(a, plan, c); });
    report.io = c.report();
    report.closed_form = io_cost<float>(plan, Structure<float>{});
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
                                const AttentionOptions& options) {
    if (structure.support == nullptr && !has_sparse_operand(structure) &&
        bf16_kernels_native()) { // a dense plan, O(1)
        const AttentionPlan plan =
            plan_attention<bf16>(args.problem, Pass::forward, structure, options);
        if (runs_native(plan, structure, Pass::forward))
            return run_native(args, plan, options);
    }
    return widened<WidenedForward>(
        args, structure, options, [&](const ForwardArgs<float>& a, const Structure<float>& s) {
            return attention<float>(a, s, options);
        });
}

template <>
AttentionReport attention<bf16>(const ForwardArgs<bf16>& args,
                                const Structure<bf16>& structure,
                                const AttentionPlan& plan,
                                const AttentionOptions& options) {
    if (runs_native(plan, structure, Pass::forward))
        return run_native(args, plan, options);
    return widened<WidenedForward>(
        args, structure, options, [&](const ForwardArgs<float>& a, const Structure<float>& s) {
            return attention<float>(a, s, plan, options);
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
            return run_native(args, plan, options);
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
        return run_native(args, plan, options);
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
