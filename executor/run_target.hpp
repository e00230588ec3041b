// defines: executor::resolve_run_target (a plan for the ranks that really exist)
#pragma once
#include "sim/target.hpp"

namespace executor {

/// @brief sim::resolve_target for a run over `world` MPI ranks: unless given, dp = world / (tp x pp) and
/// the cluster's node count = world / its GPUs per node (a 1-node cluster of `world` ranks when
/// fewer), dtype fp32 on a CPU cluster (arch: cpu), stack cpp (the executor issues from C++),
/// and micro_batch = row_slices along the batch axis (one sequence per slice; 1 without Domino). Throws common::ConfigError when the
/// plan's GPU count is not `world` ("mpirun -np N" must match tp x dp x pp).
sim::Target resolve_run_target(sim::TargetInput in, int world);

}  // namespace executor
