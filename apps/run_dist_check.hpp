#pragma once
// The --check of `ioattn run --dist`: rank 0 gathers the distributed outputs and compares them with
// a single-process run of the same kernel and with the double reference, all from the same inputs:
// passed iff, for every output tensor, err(distributed) <= 2 err(single) + tiny against the
// reference (the error-ratio rule of docs/design.md section 14, the single-process kernel in the
// naive's place). bf16: the single-process run is the bf16 entry (dense::forward / backward,
// ioattn::attention for a support) and the verdict is the tolerance of docs/design.md section 16
// against the double reference on the bf16 inputs, as `ioattn run --dtype bf16 --check`.

#include "run_dist_data.hpp"

#include <ioattn/memory_model.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>

#include <nlohmann/json.hpp>

#include <mpi.h>

namespace ioattn::app {

/// Collective (gathers to rank 0). Forward: O and L; backward: dQ, dK, dV, each pipeline from
/// its own forward. Returns {max_abs_error, single_error, max_abs_diff, tiny, error_ratio,
/// passed} on rank 0 and null elsewhere (bf16: and tolerance; max_abs_error is the backward's
/// largest relative Frobenius error). `support` null: dense (problem.causal as given).
template <typename Scalar>
nlohmann::json check_distributed(MPI_Comm comm,
                                 const DistData<Scalar>& data,
                                 Pass pass,
                                 const sparse::Support* support,
                                 const Tiling& tiling,
                                 const MemoryModel& memory,
                                 int threads);

template <>
nlohmann::json check_distributed<bf16>(MPI_Comm comm,
                                       const DistData<bf16>& data,
                                       Pass pass,
                                       const sparse::Support* support,
                                       const Tiling& tiling,
                                       const MemoryModel& memory,
                                       int threads);

} // namespace ioattn::app
