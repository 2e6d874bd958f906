#pragma once
/// A schedule and its tile sizes: the value that says how a kernel moves data.

#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>

namespace ioattn {

/// Which kernel family runs.
enum class Schedule {
    reference,   ///< materialized scores, double accumulation (the test oracle)
    fused,       ///< FlashAttention-2 streaming: scores never leave fast memory
    materialized ///< Saha & Ye Algorithm 1: square tiles, scores written to slow memory
};

/// Forward or backward pass.
enum class Pass { forward, backward };

/// How the automatic choice between fused and materialized is made.
enum class Select {
    theory, ///< the papers' crossover: fused iff M >= d^2 (sparse: M >= Z_input^2 / Z_QK)
    cost    ///< the schedule whose exact I/O for this shape and M is lower
};

std::string_view to_string(Schedule s);
std::string_view to_string(Pass p);
std::string_view to_string(Select s);
/// Parses "reference", "fused", "materialized"; throws InvalidArgument otherwise.
Schedule parse_schedule(std::string_view text);

/// Rows a kernel keeps as the vector lanes of its fast-memory tiles (the fused forward's
/// resident query rows, the fused backward's resident key rows and its streamed query block, d
/// in the backward's dQ = dS K) are padded to a multiple of kLanePad words, under every
/// instruction set: the footprint, hence the counted residency and every tiling, is the same
/// whichever ISA target runs (16 floats are one 64-byte cache line; AVX2 takes two vectors).
inline constexpr std::int64_t kLanePad = 16;

/// n rounded up to a multiple of kLanePad.
constexpr std::int64_t lane_padded(std::int64_t n) {
    return (n + kLanePad - 1) / kLanePad * kLanePad;
}

/// Which kernels a tiling is for: the dense ones (ioattn::dense) or those over the nonzero
/// structure of a mask (ioattn::sparse), which also hold the gathered copies of the rows they
/// stream and the index arrays they walk (cursors, row intervals, a chunk's keys, a line of
/// each row's column indices), so the same tile sizes need more fast memory.
enum class Kernels { dense, sparse };

/// Words an int64 index takes in the residency of the sparse kernels: two fp32 words (in
/// double it is one word; counted as two, an upper bound).
inline constexpr std::int64_t kIndexWords = 2;

/// Words of Scalar that reading one int64 index moves (two in float, one in double): the unit
/// of the sparse kernels' counted index reads (Operand::index).
template <typename Scalar>
inline constexpr std::int64_t kIndexReadWords = static_cast<std::int64_t>(sizeof(std::int64_t) /
                                                                          sizeof(Scalar));

/// Tile sizes of a schedule. Fused: rows = Br (query rows resident), cols = Bc (keys streamed
/// per step). Materialized: rows = cols = b, the side of the square tiles.
struct Tiling {
    Schedule schedule = Schedule::fused;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    /// The materialized schedule's feature chunk: products over d and d_v run in chunks of
    /// this width (0: rows, the tile side). A depth of at least d keeps Q_i resident across
    /// its row block's tiles, and of at least d_v makes O_i one pass over the stored scores
    /// (docs/design.md sections 3.2, 6.4); the sparse kernels' backward takes it too, the
    /// dense backward does not. 0 for the fused schedule.
    std::int64_t depth = 0;

    /// The width of the feature chunks: depth, or rows when depth is 0.
    [[nodiscard]] std::int64_t feature_chunk() const { return depth > 0 ? depth : rows; }

    /// The I/O-optimal tiling of `schedule` for the model: fused maximises Br under the
    /// residency limit (Bc chosen small), materialized takes b = floor(sqrt(M/4)).
    /// Throws CapacityError if no tiling fits M.
    static Tiling for_memory(Schedule schedule,
                             const MemoryModel& memory,
                             const Problem& problem,
                             Pass pass = Pass::forward,
                             Kernels kernels = Kernels::dense);

    /// As for_memory, but std::nullopt when M is too small for any tiling.
    static std::optional<Tiling> try_for_memory(Schedule schedule,
                                                const MemoryModel& memory,
                                                const Problem& problem,
                                                Pass pass = Pass::forward,
                                                Kernels kernels = Kernels::dense);

    /// A tiling tuned for this CPU (register blocking, cache, enough tasks for the threads)
    /// that still fits M; falls back to for_memory when the tuned one does not fit.
    static Tiling tuned(Schedule schedule,
                        const MemoryModel& memory,
                        const Problem& problem,
                        Pass pass = Pass::forward,
                        Kernels kernels = Kernels::dense);

    /// Peak fast-memory residency in words of this tiling on `problem`: the footprint of the
    /// kernel as it lays its data out (lane padding, packed and transposed copies, per-row
    /// statistics, the streamed rows of a step), which is what a cache of that size must hold.
    [[nodiscard]] std::int64_t resident_words(const Problem& problem,
                                              Pass pass = Pass::forward,
                                              Kernels kernels = Kernels::dense) const;

    /// Throws InvalidArgument for non-positive sizes, a non-square materialized tiling or a
    /// depth outside the materialized schedule (or on the dense backward), and CapacityError when
    /// resident_words(problem) > M. `where` names the caller.
    void validate(std::string_view where,
                  const MemoryModel& memory,
                  const Problem& problem,
                  Pass pass = Pass::forward,
                  Kernels kernels = Kernels::dense) const;

    bool operator==(const Tiling&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Tiling& t);

/// G, the number of dQ partial sums of the fused backward (key block j adds into partial
/// j mod G; see dense/backward_fused.cpp): enough (kv slice, group) tasks to keep 16 workers
/// busy, at most 8 and at most the number of key blocks. A function of the shape only, so the
/// results do not depend on the thread count.
std::int64_t backward_dq_groups(const Problem& problem, std::int64_t key_blocks);

/// The smallest M (words) for which `schedule` (nullopt: the fused or the materialized one)
/// has a tiling of `pass` on `problem` for `kernels` (the sparse kernels hold more: see
/// ioattn::Kernels); 0 if none up to 2^50. Throws InvalidArgument for a bad problem. O(log M)
/// tiling searches. (Here, not in attention.hpp, so that everything built on ioattn::core,
/// the finite-field verifier among it, uses the one definition.)
std::int64_t smallest_memory(const Problem& problem,
                             Pass pass,
                             std::optional<Schedule> schedule = {},
                             Kernels kernels = Kernels::dense);

} // namespace ioattn
