// defines: executor::Backend (what the interpreter drives to run a StepGraph for real),
//          BackendKind, BackendOptions, TaskClock, make_backend, make_cpu_backend, make_cuda_backend
//
// How the interpreter (executor/run.hpp) drives a backend, once per training step:
//
//   backend.prepare(graph, init)                     // once: allocate every tensor, init weights
//   for each step:
//     for each round (grad_accum_steps / graph.micro_batches of them: a pipeline stage's graph is the whole step):
//       backend.begin_micro_batch(batch)             // upload token ids / targets of every micro-batch and slice
//       for task t in vertex (= host issue) order, skipping once_per_step tasks unless the round is the last
//       and step_start tasks unless it is the first:
//         backend.issue(t, waits(t))                 // waits: predecessors of t on OTHER streams
//       backend.end_micro_batch(timing)              // wait for all streams; per-task start/end
//
// Semantics the backend must provide (CUDA stream semantics):
//  - each stream of the graph (StepGraph::streams) is an in-order queue: tasks issued on one stream run in issue order;
//  - issue(t, waits) may return before t has run; t starts only after every task in `waits`
//    (all issued earlier, on other streams) has finished — CPU: the compute stream runs on the
//    calling thread and waits on a completion flag; CUDA: cudaStreamWaitEvent on the producer's
//    event. Same-stream predecessors are ordered by the stream itself and are not listed;
//  - collectives (Task::group tp / dp / embd) run on their communicator; every rank of the group
//    issues the same collectives in the same order (the graphs are identical), so they match by order;
//  - pipeline transfers (send_recv on group pp_fwd / pp_bwd): a task with an input sends it to the
//    neighbouring stage's rank of the same lane, one with an output receives into it (pp_fwd: to the
//    next stage / from the previous; pp_bwd: the reverse); each direction's transfers keep their order;
//  - timing: start/end of every issued task in nanoseconds since begin_micro_batch (steady
//    clock on CPU, CUDA events on GPU), filled by end_micro_batch.
//
// What each task computes is fixed by (Task::op, Task::phase) and its operands
// (StepGraph::inputs / outputs), as docs/executor.md ("Kernel contract") describes; both
// backends implement that contract. The CPU kernels live in executor/cpu/kernels.hpp and are the
// reference implementation.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "executor/init.hpp"
#include "sim/step_graph.hpp"

namespace executor {

enum class BackendKind : std::uint8_t { cpu, cuda };
std::string_view to_string(BackendKind k);
/// Parses "cpu" | "cuda"; false on anything else.
bool parse_backend_kind(std::string_view s, BackendKind& out);

/// @brief Where this process sits: its MPI rank in MPI_COMM_WORLD and the group split.
/// World rank r = t + tp x (d + dp x s): TP rank t, DP rank d, pipeline stage s (sim/pipeline_schedule.hpp,
/// pipeline_position); r / tp is its TP group (the instance of the graph's "tp" group).
struct BackendOptions {
  int world_rank = 0;
  int world_size = 1;
  int tp = 1;
  int dp = 1;
  int pp = 1;
  bool pipeline_wraps = false;  ///< the interleaved schedule: the last stage sends on to the first (CUDA communicators)
  int tp_channels = 0;  ///< the plan's tp_channels: CUDA: the TP communicators' minCTAs = maxCTAs (0: NCCL's choice)
  int device = -1;       ///< CUDA device ordinal; -1: local rank (OMPI/SLURM local rank % devices)
  int cpu_threads = 1;   ///< CPU backend: OpenBLAS threads per rank
  /// A collective or exchange that makes no progress for this long throws FaultError naming the
  /// ranks it waits on (the CLI then aborts the job); 0 disables the watchdog.
  double watchdog_s = 20;
};

/// @brief Start and end of one task, in nanoseconds since begin_micro_batch.
struct TaskClock {
  std::int64_t start_ns = -1, end_ns = -1;  ///< -1: not issued in this micro-batch
};

/// @brief Runs the tasks of one rank's StepGraph on real hardware. Not thread-safe: one
/// interpreter thread calls it. Move-only (owns device memory, communicators and threads).
class Backend {
 public:
  virtual ~Backend() = default;
  /// "cpu (OpenBLAS, 2 MPI ranks)" — for reports.
  virtual std::string describe() const = 0;

  /// @brief Allocates every tensor of `graph` (which must outlive the backend), initialises
  /// weights with init_weight() (identical whatever the plan), zeroes weight gradients and the
  /// AdamW state. Called once.
  virtual void prepare(const sim::StepGraph& graph, const TrainingOptions& options) = 0;

  /// @brief Starts a micro-batch: copies each slice's token ids and targets (Batch::tokens /
  /// Batch::targets, slice-major as slice_rows() lays them out) into the graph's input tensors
  /// and resets the per-task clock.
  virtual void begin_micro_batch(const Batch& batch) = 0;

  /// @brief Issues task `t` on its stream after `waits` (earlier tasks on other streams).
  virtual void issue(std::uint32_t t, std::span<const std::uint32_t> waits) = 0;

  /// @brief Waits until every issued task has finished; `timing` (resized to the graph's size)
  /// gets each task's start/end in this micro-batch ({-1,-1} for tasks not issued).
  virtual void end_micro_batch(std::vector<TaskClock>& timing) = 0;

  /// @brief Sum of the per-token cross-entropy over this rank's tokens of the last micro-batch
  /// (the Op::loss output tensors), after end_micro_batch. Identical on the ranks of a TP group.
  virtual double loss_sum() = 0;

  /// @brief Copies tensor `id` to the host as fp32 (row-major rows x cols), after end_micro_batch.
  /// For tests and gradient dumps.
  virtual std::vector<float> read_tensor(sim::TensorId id) = 0;
};

/// @brief CPU backend: OpenBLAS cblas_sgemm (fp32 only), the kernels of executor/cpu/kernels.hpp,
/// one MPI process per rank, TP / DP collectives on communication threads (MPI_THREAD_MULTIPLE)
/// so that they run while the compute stream continues. MPI must be initialised.
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);

/// @brief CUDA backend (executor/cuda/, library st_executor_cuda, built when CMake finds CUDA,
/// cuBLASLt and NCCL): cuBLASLt GEMMs, CUDA kernels, NCCL collectives on their own streams, CUDA
/// events for cross-stream edges. Throws std::runtime_error ("no CUDA device: ...") when no GPU
/// is usable. MPI must be initialised (the ncclUniqueId is broadcast over MPI_COMM_WORLD).
/// Declared always; defined only in st_executor_cuda, which the slicetune program reaches through
/// the CUDA plug-in (libslicetune_cuda.so) so that it maps the CUDA libraries only for CUDA runs.
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);

/// @brief The backend of `kind`; never null. Throws common::ConfigError("--backend", ...) for
/// cuda when this build has no CUDA backend or the plug-in or CUDA libraries cannot be loaded.
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options);

}  // namespace executor
