// defines: executor::cuda::Device (one GPU running one rank's launch list: streams, events,
//          cuBLASLt, NCCL communicators; implemented in device.cu), DeviceOptions, AdamWOptions,
//          require_cuda_devices
// Host-only (STYLE rule 8): no CUDA types here, so cuda_backend.cpp and the tests include it with
// a plain C++ compiler.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "executor/cuda/launch_plan.hpp"

namespace executor::cuda {

/// @brief Number of CUDA devices this process can use. Throws std::runtime_error with one line,
/// "no CUDA device: <reason from the CUDA runtime> ...", when there is none (no GPU or no driver).
int require_cuda_devices();

struct DeviceOptions {
  int world_rank = 0;  ///< MPI_COMM_WORLD rank = t + tp x (d + dp x stage); TP group = world_rank / tp
  int tp = 1, dp = 1, pp = 1;
  bool pipeline_wraps = false;  ///< the interleaved schedule: the last stage also sends to the first
  int tp_channels = 0;          ///< the TP communicators' NCCL channels (ncclConfig_t minCTAs = maxCTAs); 0: NCCL's choice
  int device = -1;     ///< CUDA ordinal; -1: node-local rank (MPI_COMM_TYPE_SHARED) modulo the device count
  /// Watchdog: when a stream has not drained after this many seconds (an NCCL collective waiting on
  /// a peer that stopped), the NCCL communicators are aborted and end_micro_batch throws
  /// std::runtime_error naming the ranks of the stuck communicator; 0 disables.
  double watchdog_s = 20;
};

struct AdamWOptions {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

/// @brief What prepare() needs besides the graph: step-0 weights and optimizer settings, supplied
/// by the executor's shared init code so that every backend starts from the same model.
struct DeviceSetup {
  std::function<std::vector<float>(sim::TensorId)> init_weight;  ///< fp32, rows x cols
  std::function<bool(sim::TensorId)> decays;                      ///< AdamW weight decay for this weight
  AdamWOptions adamw;
  std::int64_t tokens_per_step = 1;  ///< the loss gradient is scaled by its inverse
};

/// @brief One GPU of one rank. Not thread-safe; move-only (owns device memory, streams,
/// communicators). MPI must be initialised before open().
class Device {
 public:
  /// Selects the GPU, creates streams and handles, and bootstraps the TP and DP NCCL communicators
  /// (ncclUniqueId broadcast over MPI sub-communicators), and with pp > 1 one two-rank communicator
  /// per pipeline boundary and direction (each used by one stream on either side, so transfers of
  /// one direction never queue behind the other's) and the embedding group of the first and last
  /// stage. Collective over MPI_COMM_WORLD.
  static std::unique_ptr<Device> open(const DeviceOptions& options);
  virtual ~Device() = default;

  virtual std::string describe() const = 0;
  /// Allocates the arena and scratch, uploads the step-0 weights, prepares every GEMM. `graph` and
  /// `plan` must outlive the device.
  virtual void prepare(const sim::StepGraph& graph, const LaunchPlan& plan, const DeviceSetup& setup) = 0;
  /// Uploads token ids, targets and positions, [micro-batch x row_slices + slice][row]
  /// (executor::batch_index), on a 2D / 2.5D grid also the grid column's tokens and positions
  /// (executor::Batch; empty under 1D), and marks time zero.
  virtual void begin_micro_batch(const std::vector<std::vector<std::int32_t>>& tokens,
                                 const std::vector<std::vector<std::int32_t>>& targets,
                                 const std::vector<std::vector<std::int32_t>>& positions,
                                 const std::vector<std::vector<std::int32_t>>& column_tokens,
                                 const std::vector<std::vector<std::int32_t>>& column_positions) = 0;
  /// Issues task t on its stream after `waits` (earlier tasks on other streams): one
  /// cudaStreamWaitEvent per wait, the call(s), one cudaEventRecord if a later task waits on t.
  virtual void issue(std::uint32_t t, std::span<const std::uint32_t> waits) = 0;
  /// Synchronises the three streams (not the device) and returns per-task [start, end] in ns since
  /// begin_micro_batch ({-1, -1} for tasks not issued).
  virtual std::vector<std::pair<std::int64_t, std::int64_t>> end_micro_batch() = 0;
  /// Tensor `id` as fp32 on the host (token ids converted), after end_micro_batch.
  virtual std::vector<float> read_tensor(sim::TensorId id) = 0;
};

}  // namespace executor::cuda
