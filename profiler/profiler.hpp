// defines: profiler::Options, profiler::measure (runs the measurements of one backend into a Profile),
//          profiler::cpu_available, profiler::cuda_available
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "hardware/ops.hpp"
#include "hardware/profile.hpp"

namespace profiler {

/// @brief An element-wise task of a model's step graph: its op and the rows its kernel runs over, so
/// that a backend can time it at its real row width (op.elements / rows: the hidden size for norms,
/// residuals and embeddings, the FFN width for activations, the local vocabulary for cross-entropy).
struct ElementwiseShape {
  hardware::ElementwiseOp op;
  std::int64_t rows = 1;
};

/// @brief What to measure. Shapes beyond the built-in grids come from a model's step graphs
/// (cli/profile.cpp collects them), so the profiler itself depends only on hardware/.
struct Options {
  std::string backend = "cpu";  ///< cpu | cuda
  bool quick = false;           ///< smaller grids and fewer iterations (well under a minute on 2 cores)
  std::string command;          ///< recorded as provenance
  std::vector<hardware::GemmOp> gemm_shapes;          ///< exact shapes to add (a model's full and sliced GEMMs)
  std::vector<hardware::AttentionOp> attention_shapes;
  std::vector<ElementwiseShape> elementwise_shapes;
  std::vector<std::int64_t> optimizer_params;
  std::ostream* progress = nullptr;  ///< rank 0 writes progress here (stderr when null)
};

/// @brief Runs every measurement nccl-tests style (warm-up, timed iterations, times reduced across
/// ranks, then a separate correctness pass that throws on a wrong result). Collective across the MPI
/// job: every rank calls it; MPI is initialised here if it is not yet. The returned profile is
/// complete on every rank; only rank 0 should write it. Throws common::ConfigError for a backend
/// this build or machine cannot run.
hardware::Profile measure(const Options& options);

/// @brief This process's rank in the MPI job (0 before MPI is initialised).
int mpi_rank();
/// @brief Finalises MPI if measure() initialised it (call once, before exit).
void finish();
/// @brief Ends the whole MPI job (MPI_Abort with `code`) after a fault one rank saw, when other
/// ranks may be waiting on it; exits the process when MPI is not running.
[[noreturn]] void abort_job(int code);

bool cpu_available();   ///< built with OpenBLAS and MPI
bool cuda_available();  ///< built with CUDA, cuBLASLt and NCCL (SLICETUNE_CUDA)

}  // namespace profiler
