// ioattn::ff::detail::record_sparse: recorded dry runs of the sparse kernels (forward,
// backward; fused, materializing) over a support given by a spec, with dense or sparse inputs,
// and the pattern families of the epoch experiments
// Field: none (DryRunCounter walks the schedule from the structure only).
// Instances: one slice, n_q = n_k = N, d_v = d, float; the support from parse_pattern(spec, N,
//   N, seed); sparse inputs store Q, K, V with sparse_input_pattern (streams 91, 92, 93), values
//   1 (a dry run reads only the structure).
// Without ioattn::sparse (IOATTN_FF_WITH_SPARSE undefined) record_sparse and
//   check_pattern_fits throw InvalidArgument and there are no families.
// Tests: tests/finite_field/epochs_test.cpp, tests/finite_field/experiments_test.cpp

#include "record.hpp"

#include <ioattn/error.hpp>

#ifdef IOATTN_FF_WITH_SPARSE
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/sparse_rows.hpp>
#endif

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>

namespace ioattn::ff::detail {

#ifdef IOATTN_FF_WITH_SPARSE

namespace {

RowPattern to_pattern(const sparse::Support& s) {
    RowPattern p;
    p.offsets.assign(s.row_offsets().begin(), s.row_offsets().end());
    p.cols.assign(s.col_indices().begin(), s.col_indices().end());
    return p;
}

sparse::SparseRows<float> to_rows(const RowPattern& p, std::int64_t cols) {
    return {p.rows(), cols, p.offsets, p.cols, std::vector<float>(p.cols.size(), 1.0F)};
}

// The integer arguments of each term of a spec that parse_pattern accepted ("file:" skipped).
struct SpecTerm {
    std::string name;
    std::vector<std::int64_t> args;
};

std::vector<SpecTerm> spec_terms(std::string_view spec) {
    std::vector<SpecTerm> out;
    std::size_t i = 0;
    while (i < spec.size()) {
        const std::size_t end = spec.find_first_of("+&()", i);
        std::string_view atom = spec.substr(i, end == std::string_view::npos ? end : end - i);
        i = end == std::string_view::npos ? spec.size() : end + 1;
        while (!atom.empty() && atom.front() == ' ')
            atom.remove_prefix(1);
        while (!atom.empty() && atom.back() == ' ')
            atom.remove_suffix(1);
        if (atom.empty() || atom.starts_with("file:"))
            continue;
        SpecTerm t;
        const std::size_t colon = atom.find(':');
        t.name = std::string(atom.substr(0, colon));
        for (std::size_t at = colon; at != std::string_view::npos;) {
            const std::size_t next = atom.find(':', at + 1);
            const std::string_view arg =
                atom.substr(at + 1, next == std::string_view::npos ? next : next - at - 1);
            std::int64_t v = 0;
            const auto [p, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), v);
            t.args.push_back(ec == std::errc() && p == arg.data() + arg.size()
                                 ? v
                                 : -1); // -1: not an integer (a density)
            at = next;
        }
        out.push_back(std::move(t));
    }
    return out;
}

// "" when the term fits N, else why not.
std::string misfit(const SpecTerm& t, std::int64_t n) {
    const auto arg = [&](std::size_t x) { return x < t.args.size() ? t.args[x] : -1; };
    const auto over = [&](const char* what, std::int64_t v, bool strict) {
        return (strict ? v >= n : v > n)
                   ? std::string(what) + " " + std::to_string(v) + (strict ? " >= N" : " > N")
                   : std::string();
    };
    if (t.name == "window" || t.name == "causal-window")
        return over("half-width", arg(0), true);
    if (t.name == "dilated")
        return over("reach W*S", arg(0) * arg(1), true);
    if (t.name == "global")
        return over("global tokens", arg(0), true);
    if (t.name == "bigbird") {
        std::string why = over("half-width", arg(0), true);
        why = why.empty() ? over("global tokens", arg(1), true) : why;
        return why.empty() ? over("random keys per row", arg(2), false) : why;
    }
    if (t.name == "strided")
        return over("block length", arg(0), false);
    if (t.name == "block")
        return over("block side", arg(0), false);
    return {};
}

} // namespace

bool sparse_available() {
    return true;
}

std::optional<Recorded> record_sparse(const ScheduleKind& kind,
                                      const std::string& spec,
                                      std::int64_t n,
                                      std::int64_t d,
                                      std::int64_t m,
                                      std::uint64_t seed,
                                      std::vector<TraceEvent> buffer) {
    const Problem problem = square_problem(n, d);
    const MemoryModel memory{m};
    const auto tiling =
        Tiling::try_for_memory(kind.schedule, memory, problem, kind.pass, Kernels::sparse);
    if (!tiling)
        return std::nullopt;
    const sparse::Support support = sparse::parse_pattern(spec, n, n, seed);
    Recorded r;
    r.tiling = *tiling;
    r.n = n;
    r.d = d;
    r.omega = to_pattern(support);
    sparse::SparseRows<float> q, k, v;
    sparse::SparseInputs<float> inputs;
    if (kind.sparse_inputs) {
        r.q = sparse_input_pattern(n, d, seed, 91);
        r.k = sparse_input_pattern(n, d, seed, 92);
        q = to_rows(*r.q, d);
        k = to_rows(*r.k, d);
        v = to_rows(sparse_input_pattern(n, d, seed, 93), d);
        inputs = {&q, &k, &v};
    }
    DryRunCounter counter(m, true);
    counter.reuse_trace(std::move(buffer));
    if (kind.pass == Pass::forward) {
        const auto args = ForwardArgs<float>::shape_only(problem);
        sparse::forward<float, DryRunCounter>(args, support, inputs, *tiling, memory, counter);
    } else {
        const auto args = BackwardArgs<float>::shape_only(problem);
        sparse::backward<float, DryRunCounter>(args, support, inputs, *tiling, memory, counter);
    }
    r.trace = counter.take_trace();
    return r;
}

std::vector<std::string> pattern_families(std::int64_t n) {
    const auto s = [](std::int64_t v) { return std::to_string(std::max<std::int64_t>(v, 1)); };
    const auto root = static_cast<std::int64_t>(std::sqrt(static_cast<double>(n)));
    return {"dense",
            "causal",
            "window:" + s(n / 16),
            "causal-window:" + s(n / 8),
            "dilated:" + s(n / 32) + ":2",
            "global:2+window:" + s(n / 32),
            "strided:" + s(root),
            "bigbird:" + s(n / 32) + ":2:3",
            "block:" + s(n / 8) + ":0.3",
            "random:0.05"};
}

void check_pattern_fits(const std::string& spec, std::int64_t n, const char* where) {
    (void)sparse::parse_pattern(spec, n, n, 1); // syntax, ranges, a file's shape
    for (const SpecTerm& t : spec_terms(spec)) {
        const std::string why = misfit(t, n);
        if (!why.empty())
            throw InvalidArgument(std::string(where) + ": pattern '" + spec +
                                  "' does not fit N = " + std::to_string(n) + " (" + t.name + " " +
                                  why + ")");
    }
}

bool pattern_fits(const std::string& spec, std::int64_t n) {
    try {
        check_pattern_fits(spec, n, "");
        return true;
    } catch (const InvalidArgument&) {
        return false;
    }
}

RowPattern support_pattern(const std::string& spec, std::int64_t n, std::uint64_t seed) {
    return to_pattern(sparse::parse_pattern(spec, n, n, seed));
}

#else // the sparse kernels are not built

namespace {

[[noreturn]] void unavailable(const char* where) {
    throw InvalidArgument(std::string(where) +
                          ": patterns need ioattn::sparse (configure with IOATTN_WITH_SPARSE=ON)");
}

} // namespace

bool sparse_available() {
    return false;
}

std::optional<Recorded> record_sparse(const ScheduleKind& /*kind*/,
                                      const std::string& /*spec*/,
                                      std::int64_t /*n*/,
                                      std::int64_t /*d*/,
                                      std::int64_t /*m*/,
                                      std::uint64_t /*seed*/,
                                      std::vector<TraceEvent> /*buffer*/) {
    unavailable("ioattn::ff::record_sparse");
}

std::vector<std::string> pattern_families(std::int64_t /*n*/) {
    return {};
}

void check_pattern_fits(const std::string& /*spec*/, std::int64_t /*n*/, const char* where) {
    unavailable(where);
}

bool pattern_fits(const std::string& /*spec*/, std::int64_t /*n*/) {
    return false;
}

RowPattern
support_pattern(const std::string& /*spec*/, std::int64_t /*n*/, std::uint64_t /*seed*/) {
    unavailable("ioattn::ff::support_pattern");
}

#endif

} // namespace ioattn::ff::detail
