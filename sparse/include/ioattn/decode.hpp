#pragma once
/// Tier 1: decoding over a key/value cache. A batch of sequences, each with its own cached
/// length, gets n_new (1..16) new query tokens per head; the new tokens are the last n_new
/// positions of their sequence (their K and V already appended to the cache) and see the cache
/// causally: new token t of sequence b, at position kv_lens[b] - n_new + t, sees the cached
/// positions <= its own. Grouped-query and multi-query attention: heads is a multiple of
/// kv_heads, query head h reads kv head h / (heads / kv_heads). A sliding window of W keys
/// (DecodeArgs::window) narrows what token t, at position p, sees to the positions (p - W, p]:
/// the rows before the first position some token of the sequence sees are never read. Any
/// other support pattern over the cached positions (DecodeArgs::pattern: global tokens with a
/// window, strided, dilated, block-sparse, random, ...) is built per sequence on its n_new x
/// len_b problem and restricted to the causal rule; only the rows some new token sees are read.
///
/// The cache is contiguous ([batch][kv_heads][capacity][d]) or paged as vLLM and OpenVINO lay
/// it out ([num_blocks][kv_heads][block_size][d] with a block table [batch][max_blocks]:
/// position p of sequence b lies in row p % block_size of block table[b][p / block_size]).
/// Its elements are the working type, ioattn::bf16 or ioattn::fp16 (IEEE half, llama.cpp's
/// default cache type), widened exactly to float on load.
///
/// The schedule (docs/design.md section 15): for each (sequence, kv head) the query rows of the
/// group (heads / kv_heads heads x n_new tokens) are one block that meets each cached row once,
/// so every visible cached word is read once; the cache is cut into chunks of a fixed length
/// processed in parallel with partial softmax states merged in chunk order, so results are
/// bitwise the same on any thread count. The exact I/O is io_cost_decode; the lower bound,
/// decode_lower_bound, reads every visible cached word once.

#include <ioattn/bf16.hpp>
#include <ioattn/fp16.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ioattn {

/// Keys per chunk of the decode schedule, least and most, when DecodeOptions::chunk is 0
/// (default_decode_chunk).
inline constexpr std::int64_t kDecodeChunk = 512;
inline constexpr std::int64_t kDecodeChunkMax = 2048;

/// The chunk of a call whose longest sequence has `rows` visible cached rows: kDecodeChunk,
/// doubled up to kDecodeChunkMax while that sequence still gets more than 16 chunks. Fixed by
/// the lengths, never by the thread count. A chunk starts its pipeline of reads cold, which a
/// bf16 cache's short chunks pay most: n_k = 65536 (2048 keys) 0.92x the time of 512-key chunks
/// (docs/performance.md section 12).
constexpr std::int64_t default_decode_chunk(std::int64_t rows) {
    std::int64_t c = kDecodeChunk;
    while (c < kDecodeChunkMax && rows > 16 * c)
        c *= 2;
    return c;
}

/// Keys per tile inside a chunk: one softmax update per tile of scores.
inline constexpr std::int64_t kDecodeTile = 64;

/// A chunk's keys are a multiple of this (the last tile of a chunk may be partial).
inline constexpr std::int64_t kDecodeChunkStep = 16;

/// Largest number of new tokens per sequence.
inline constexpr std::int64_t kDecodeMaxNew = 16;

/// A block table: row b lists the physical blocks of sequence b in order.
struct BlockTable {
    const std::int64_t* data = nullptr; ///< null: the cache is contiguous
    std::int64_t rows = 0;              ///< sequences (= batch)
    std::int64_t cols = 0;              ///< max_blocks per sequence
    std::int64_t stride = 0;            ///< elements between rows (>= cols)
};

/// Operands of a decode call. Cache = Scalar, bf16 or fp16.
template <typename Scalar, typename Cache = Scalar>
struct DecodeArgs {
    TensorView<const Scalar> q; ///< [batch][heads][n_new][d]
    /// Contiguous: [batch][kv_heads][capacity][d]. Paged: [num_blocks][kv_heads][block_size][d].
    TensorView<const Cache> k;
    TensorView<const Cache> v; ///< as k, with d_v columns
    /// [batch] cached lengths, the new tokens included (0: an empty sequence).
    const std::int64_t* kv_lens = nullptr;
    BlockTable block_table{}; ///< data null: contiguous cache
    TensorView<Scalar> o;     ///< [batch][heads][n_new][d_v]
    TensorView<Scalar> lse;   ///< [batch][heads][n_new][1], natural log
    double scale = 0.0;       ///< 0: 1/sqrt(d)
    /// > 0: token at position p sees the cached positions (p - window, p]; 0: all <= p.
    std::int64_t window = 0;
    /// Non-empty: a support pattern over the cached positions in the grammar of `--pattern`
    /// (sparse/pattern.hpp), built for each sequence on the n_new x kv_lens[b] problem (bottom-
    /// right aligned, as ioattn::attention aligns it) with pattern_seed, and restricted to the
    /// causal rule (decode_pattern_rows). Window specs ("causal-window:W", "window:W") are
    /// window = W + 1; with a pattern, window must be 0.
    std::string_view pattern;
    std::uint64_t pattern_seed = 0; ///< the seed of a random pattern

    [[nodiscard]] bool paged() const { return block_table.data != nullptr; }
};

/// How a decode call runs and counts.
struct DecodeOptions {
    std::int64_t chunk = 0; ///< keys per chunk, a multiple of kDecodeChunkStep; 0: the default
    bool count_io = false;  ///< count the run (a dry run, then the timed run)
    bool dry_run = false;   ///< only walk the schedule and count (no data read or written)
    std::optional<MemoryModel> memory;         ///< M of the count; nullopt: per_core_l2
    int threads = 0;                           ///< at most this many workers; <= 0: all
    std::string_view where = "ioattn::decode"; ///< the caller named in error messages
};

/// The shape of a decode call: what its plan, closed form and bound depend on.
struct DecodeShape {
    std::int64_t batch = 1;
    std::int64_t heads = 1;
    std::int64_t kv_heads = 1;
    std::int64_t n_new = 1;
    std::int64_t d = 0;
    std::int64_t d_v = 0;              ///< 0: d
    std::vector<std::int64_t> kv_lens; ///< [batch]
    std::int64_t window = 0;           ///< keys a token sees, itself included (0: all)
    std::int64_t word_bytes_cache = 0; ///< bytes of a cached element (0: those of the scalar)
    std::string pattern;               ///< beyond windows (DecodeArgs::pattern); empty: none
    std::uint64_t pattern_seed = 0;    ///< the seed of a random pattern
};

/// The cached positions of one sequence under a pattern beyond windows: `positions`, ascending,
/// those some new token sees (the rows the schedule reads; visible index v is positions[v]);
/// token t sees visible indices index[indptr[t], indptr[t + 1]), ascending.
struct DecodeRows {
    std::vector<std::int64_t> positions;
    std::vector<std::int64_t> indptr; ///< n_new + 1
    std::vector<std::int64_t> index;
};

/// What a decode call runs: the resolved shape and its chunks.
struct DecodePlan {
    DecodeShape shape;  ///< d_v resolved
    double scale = 0.0; ///< resolved
    std::int64_t chunk = kDecodeChunk;
    MemoryModel memory;
    /// first_chunk[b]: chunks of sequences before b (per kv head); first_chunk[batch]: all.
    std::vector<std::int64_t> first_chunk;
    /// With shape.pattern: sequence b's visible rows (empty without a pattern).
    std::vector<DecodeRows> rows;

    /// Query rows of one (sequence, kv head): heads / kv_heads x n_new.
    [[nodiscard]] std::int64_t group_rows() const {
        return shape.heads / shape.kv_heads * shape.n_new;
    }

    /// Chunks of sequence b (per kv head).
    [[nodiscard]] std::int64_t chunks(std::int64_t b) const {
        return first_chunk[static_cast<std::size_t>(b) + 1] -
               first_chunk[static_cast<std::size_t>(b)];
    }

    /// The first cached row some new token of sequence b sees (0 without a window or pattern).
    [[nodiscard]] std::int64_t first_row(std::int64_t b) const;

    /// Cached rows of sequence b some new token sees: the rows the schedule reads.
    [[nodiscard]] std::int64_t visible_rows(std::int64_t b) const;

    /// The cached position of sequence b's visible row v (< visible_rows(b)).
    [[nodiscard]] std::int64_t position(std::int64_t b, std::int64_t v) const {
        return rows.empty()
                   ? first_row(b) + v
                   : rows[static_cast<std::size_t>(b)].positions[static_cast<std::size_t>(v)];
    }

    /// Parallel tasks of the chunk phase: every chunk of every (sequence, kv head).
    [[nodiscard]] std::int64_t tasks() const { return first_chunk.back() * shape.kv_heads; }

    /// Cached rows visible to some new token, summed over sequences (per kv head).
    [[nodiscard]] std::int64_t kv_rows() const;
};

/// What a decode call ran and, when counted, moved.
struct DecodeReport {
    DecodePlan plan;
    std::optional<IoReport> io;          ///< counted words (count_io or dry_run)
    std::optional<IoReport> closed_form; ///< io_cost_decode(plan), beside io
};

/// The plan of a shape: validates it (positive sizes, heads a multiple of kv_heads, n_new in
/// 1..16, lengths >= 0 and 0 or >= n_new, window >= 0, a pattern the grammar takes and no
/// other window beside it); a window spec as the pattern becomes the window, any other builds
/// each sequence's DecodeRows. Cuts the visible rows of every sequence into chunks of
/// options.chunk keys. Throws InvalidArgument naming options.where and the values.
DecodePlan plan_decode(const DecodeShape& shape, const DecodeOptions& options = {});

/// Runs decode attention: writes args.o and args.lse (a row of an empty sequence: O = 0,
/// L = -inf). Validates every view once (shapes, strides, extents, outputs overlapping inputs,
/// lengths against the capacity or the block table, block indices against num_blocks) and
/// throws InvalidArgument naming options.where and the values; NaN and Inf in the data
/// propagate as in ioattn::attention (a cached row a token may not see never reaches it).
/// Results are bitwise independent of options.threads. A counted call (count_io, dry_run)
/// throws CapacityError when a chunk task's resident words exceed options.memory (M), before
/// anything is written. Scalar: float or double; Cache: Scalar, bf16 or fp16. Thread-safe for
/// distinct outputs.
template <typename Scalar, typename Cache = Scalar>
DecodeReport decode(const DecodeArgs<Scalar, Cache>& args, const DecodeOptions& options = {});

/// Sequence b's decode step computed by ioattn::attention (the fused forward) on packed rows:
/// q [heads][n_new][d] (the sequence's), k [kv_heads][len_b][d], v [kv_heads][len_b][d_v], with
/// len_b = shape.kv_lens[b]. Token t sees the cached positions j <= len_b - n_new + t, and with
/// shape.window = W > 0 only the W latest of them, with shape.pattern those decode_pattern_rows
/// gives it. Returns O [heads][n_new][d_v] and L
/// [heads][n_new] (len_b = 0: O = 0, L = -inf): the oracle decode() is checked against. T: float
/// or double; throws InvalidArgument for b outside the batch and as ioattn::attention does.
template <typename T>
std::pair<std::vector<T>, std::vector<T>> decode_reference(
    const DecodeShape& shape, std::int64_t b, const T* q, const T* k, const T* v, int threads = 0);

/// The window of a pattern spec over the cached positions, in the grammar of `--pattern`
/// (sparse/pattern.hpp) as decode's causal rule restricts it: "dense" and "causal" give 0 (no
/// window); "window:W" and "causal-window:W" (0 <= p - j <= W) give W + 1 keys. Any other
/// spec throws InvalidArgument naming `where` and the spec.
std::int64_t decode_window_of(std::string_view spec, std::string_view where = "ioattn::decode");

/// Token t of a sequence of len cached rows under `spec` (DecodeArgs::pattern): the keys of row
/// t of parse_pattern(spec, n_new, len, seed) that are <= len - n_new + t, as a support of n_new
/// rows over the len positions. Throws InvalidArgument naming `where` and the spec for a spec
/// the grammar rejects.
sparse::Support decode_pattern_rows(std::string_view spec,
                                    std::int64_t n_new,
                                    std::int64_t len,
                                    std::uint64_t seed,
                                    std::string_view where = "ioattn::decode");

/// The exact words the schedule moves, per (sequence b, kv head) with R = group_rows(),
/// v_b = visible_rows(b), c_b = ceil(v_b / chunk): reads c_b R d (Q, once per chunk) +
/// v_b (d + d_v) (the cache);
/// writes R (d_v + 1) (O, L); with c_b > 1 each chunk writes its partial state R (d_v + 2) and
/// the merge reads them back. Peak: the larger of a chunk's and the merge's resident words.
IoReport io_cost_decode(const DecodePlan& plan);

/// The compulsory words: every visible cached word once (sum_b v_b kv_heads (d + d_v)) and
/// Q read, O and L written once (a sequence of length 0 reads nothing).
IoReport decode_lower_bound(const DecodePlan& plan);

/// Multiply-adds x 2 of the allowed (row, cached row) pairs: 2 (d + d_v) per pair.
double flop_count_decode(const DecodePlan& plan);

} // namespace ioattn
