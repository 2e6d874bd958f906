#pragma once
// Recorded dry runs of every schedule the epoch experiments check (private): the dense kernels
// (forward and backward, fused and materialized) and, when ioattn::sparse is built
// (IOATTN_FF_WITH_SPARSE), the sparse kernels over a pattern family with dense or sparse
// inputs. One batch x head slice, n_q = n_k = N, float, DryRunCounter with recording.

#include <ioattn/ff/epochs.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ioattn::ff::detail {

/// One schedule of the epoch experiments.
struct ScheduleKind {
    Pass pass = Pass::forward;
    Schedule schedule = Schedule::fused;
    bool sparse = false;        ///< the sparse kernels over a support (else the dense kernels)
    bool sparse_inputs = false; ///< Q, K, V stored sparse (sparse kernels only)

    /// The kernels' footprint this kind runs with (Tiling::resident_words).
    [[nodiscard]] Kernels kernels() const { return sparse ? Kernels::sparse : Kernels::dense; }

    bool operator==(const ScheduleKind&) const = default;
};

/// One batch x head slice, n_q = n_k = n, head dimension d: the problem every recorded run uses
/// (its smallest M is ioattn::smallest_memory(square_problem(n, d), kind.pass, kind.schedule,
/// kind.kernels())).
Problem square_problem(std::int64_t n, std::int64_t d);

/// "dense forward fused", "sparse backward materialized, sparse inputs", ...
std::string label(const ScheduleKind& kind);

/// Every schedule kind this build records: the dense ones, then the sparse ones (if built).
std::vector<ScheduleKind> schedule_kinds();

/// Trace buffers handed from one recorded run to the next (thread-safe): a run records into a
/// buffer taken here (its capacity kept) and gives its trace back when done, so the epoch
/// experiments fault each buffer's pages in once instead of once per run.
class TraceBuffers {
public:
    /// A free buffer (empty, with the largest capacity here), or a new one.
    std::vector<TraceEvent> take();

    /// Keeps `trace`'s storage for a later take().
    void give(std::vector<TraceEvent>&& trace);

private:
    std::mutex mutex_;
    std::vector<std::vector<TraceEvent>> free_;
};

/// A recorded run with the structure its epochs need.
struct Recorded {
    Tiling tiling;
    std::vector<TraceEvent> trace;
    std::int64_t n = 0;
    std::int64_t d = 0;
    std::optional<RowPattern> omega; ///< the support (sparse kernels)
    std::optional<RowPattern> q;     ///< stored patterns (sparse inputs)
    std::optional<RowPattern> k;

    [[nodiscard]] EpochShape shape() const {
        return {n, n, d, omega ? &*omega : nullptr, q ? &*q : nullptr, k ? &*k : nullptr};
    }
};

/// The dense kernel of `kind` on N x d with M words, recorded into `buffer`'s storage; nullopt
/// when no tiling fits M.
std::optional<Recorded> record_dense(const ScheduleKind& kind,
                                     std::int64_t n,
                                     std::int64_t d,
                                     std::int64_t m,
                                     std::vector<TraceEvent> buffer = {});

/// Whether the sparse kernels are built into this library.
bool sparse_available();

/// The sparse kernel of `kind` over the support `spec` (parse_pattern at N x N with `seed`),
/// with sparse inputs when kind.sparse_inputs (sparse_input_pattern per operand); nullopt when
/// no tiling fits M; recorded into `buffer`'s storage. Throws InvalidArgument when the sparse
/// kernels are not built.
std::optional<Recorded> record_sparse(const ScheduleKind& kind,
                                      const std::string& spec,
                                      std::int64_t n,
                                      std::int64_t d,
                                      std::int64_t m,
                                      std::uint64_t seed,
                                      std::vector<TraceEvent> buffer = {});

/// The stored pattern of a sparse operand of the experiments: row r keeps a uniformly random
/// subset of [0, d) whose size is uniform in [1, d], drawn from a SplitMix64 stream seeded
/// with derive_seed(seed, stream, r) (rows independent of each other).
RowPattern
sparse_input_pattern(std::int64_t rows, std::int64_t d, std::uint64_t seed, std::uint64_t stream);

/// One spec per pattern family of ioattn::sparse (pattern.hpp), with sizes scaled to N >= 4:
/// dense, causal, window, causal-window, dilated, global+window, strided, bigbird, block, random.
std::vector<std::string> pattern_families(std::int64_t n);

/// Throws InvalidArgument naming `where` unless `spec` parses for N x N (parse_pattern) and its
/// size parameters fit N: window and causal-window W < N, dilated W*S < N, global G < N,
/// bigbird W, G < N and R <= N, strided L <= N, block B <= N (a file's shape is parse_pattern's
/// check). Without the sparse kernels any spec throws.
void check_pattern_fits(const std::string& spec, std::int64_t n, const char* where);

/// Whether check_pattern_fits would accept spec at N.
bool pattern_fits(const std::string& spec, std::int64_t n);

/// The support of spec at N x N as a RowPattern (parse_pattern with seed).
RowPattern support_pattern(const std::string& spec, std::int64_t n, std::uint64_t seed);

} // namespace ioattn::ff::detail
