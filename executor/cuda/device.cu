// executor::cuda::Device: runs a StepGraph's launch list (executor/cuda/launch_plan.hpp) on one GPU per
// process. cuBLASLt GEMMs, our kernels (executor/cuda/*.cuh) on the compute stream, NCCL collectives
// on the TP and DP communication streams; a cross-stream edge is cudaEventRecord on the producer's
// stream + cudaStreamWaitEvent on the consumer's, so the host never synchronises inside a
// micro-batch. Ranks are bootstrapped through MPI: each TP / DP group's ncclUniqueId is broadcast
// over an MPI sub-communicator, the way multi-node NCCL jobs are launched with mpirun / srun.
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "executor/cuda/adamw.cuh"
#include "executor/cuda/attention.cuh"
#include "executor/cuda/cross_entropy.cuh"
#include "executor/cuda/cuda_common.cuh"
#include "executor/cuda/device.hpp"
#include "executor/cuda/elementwise.cuh"
#include "executor/cuda/flash_attention.cuh"
#include "executor/cuda/grid.cuh"
#include "executor/cuda/zero_buckets.cuh"
#include "executor/cuda/launch_plan.hpp"
#include "executor/cuda/matmul.cuh"
#include "executor/cuda/norm.cuh"
#include "executor/zero_layout.hpp"

namespace executor::cuda {
namespace {

/// Concatenates strings and numbers (nvcc's host pass cannot compile fmt 9; messages are simple).
template <typename... A>
std::string cat(const A&... a) {
  std::string s;
  auto add = [&](const auto& x) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(x)>>) s += std::to_string(x);
    else s += x;
  };
  (add(a), ...);
  return s;
}

}  // namespace

int require_cuda_devices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error for callers that go on without CUDA
    throw std::runtime_error(cat("no CUDA device: ", cudaGetErrorString(err),
                                 " (the cuda backend needs an NVIDIA GPU and driver; try --backend cpu)"));
  }
  if (count == 0) throw std::runtime_error("no CUDA device: the CUDA runtime found 0 GPUs (try --backend cpu)");
  return count;
}

namespace {

using sim::Op;

ncclDataType_t nccl_dtype(common::DType t) {
  switch (t) {
    case common::DType::fp32: return ncclFloat;
    case common::DType::bf16: return ncclBfloat16;
    case common::DType::fp16: return ncclHalf;
    case common::DType::fp8: break;
  }
  throw std::runtime_error("cuda backend: no NCCL type for fp8");
}

float host_float(const unsigned char* p, common::DType t) {
  switch (t) {
    case common::DType::fp32: { float f; std::memcpy(&f, p, 4); return f; }
    case common::DType::bf16: { std::uint16_t b; std::memcpy(&b, p, 2); std::uint32_t u = static_cast<std::uint32_t>(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
    case common::DType::fp16: { __half h; std::memcpy(&h, p, 2); return __half2float(h); }
    case common::DType::fp8: break;
  }
  return 0.0f;
}

/// Host fp32 -> the tensor's dtype (weights at step 0).
std::vector<unsigned char> host_encode(const std::vector<float>& v, common::DType t) {
  const int b = common::dtype_bytes(t);
  std::vector<unsigned char> out(v.size() * static_cast<std::size_t>(b));
  for (std::size_t i = 0; i < v.size(); ++i) {
    unsigned char* p = out.data() + i * b;
    if (t == common::DType::fp32) std::memcpy(p, &v[i], 4);
    else if (t == common::DType::bf16) { const __nv_bfloat16 x = __float2bfloat16(v[i]); std::memcpy(p, &x, 2); }
    else { const __half x = __float2half(v[i]); std::memcpy(p, &x, 2); }
  }
  return out;
}

/// One AdamW parameter: the low-precision weight the GEMMs read (ZeRO: this rank's parameter
/// shard), its fp32 gradient (shard), master, m, v; runs of elements with one weight-decay setting.
struct Param {
  sim::TensorId weight, grad;
  float* master = nullptr;  ///< == the weight itself in fp32 runs
  float* m = nullptr;
  float* v = nullptr;
  long long count = 0;
  struct Segment {
    long long offset, count;
    bool decay;
  };
  std::vector<Segment> segments;
};

class GpuDevice final : public Device {
 public:
  explicit GpuDevice(const DeviceOptions& o) : o_(o) {
    const int count = require_cuda_devices();
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, o.world_rank, MPI_INFO_NULL, &local));
    int local_rank = 0;
    MPI_CHECK(MPI_Comm_rank(local, &local_rank));
    MPI_CHECK(MPI_Comm_free(&local));
    device_ = o.device >= 0 ? o.device : local_rank % count;
    if (device_ >= count)
      throw std::runtime_error(cat("--device: device ", device_, " does not exist (", count, " CUDA devices)"));
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaGetDeviceProperties(&props_, device_));
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUBLAS_CHECK(cublasCreate(&blas_));
    CUDA_CHECK(cudaMalloc(&lt_workspace_, kLtWorkspaceBytes));
    tp_rank_ = o.world_rank % o.tp;
    const int tp_group = o.world_rank / o.tp, lanes = o.tp * o.dp, lane = o.world_rank % lanes, stage = o.world_rank / lanes;
    const int dp_rank = (o.world_rank / o.tp) % o.dp, world = lanes * o.pp;
    tp_comm_ = make_comm(tp_group, tp_rank_, o.tp, o.tp_channels);
    dp_comm_ = make_comm(tp_rank_ + o.tp * stage, dp_rank, o.dp);
    if (o.pp > 1) {
      // boundary b joins stage b and (b + 1) mod pp of a lane; colour = (boundary, lane), a rank
      // outside the boundary takes a colour of its own (a one-rank split, no communicator)
      for (int b = 0; b < (o.pipeline_wraps ? o.pp : o.pp - 1); ++b) {
        const bool in = stage == b || stage == (b + 1) % o.pp;
        const int color = in ? lane + lanes * b : world * o.pp + o.world_rank;
        const int key = stage == b ? 0 : 1;
        for (int dir = 0; dir < 2; ++dir) {
          ncclComm_t c = make_comm(color, key, in ? 2 : 1);
          if (in) pipe_comm_[{dir, b}] = c;
        }
      }
      const bool end = stage == 0 || stage == o.pp - 1;
      embd_comm_ = make_comm(end ? lane : world + o.world_rank, stage, end ? 2 : 1);
    }
  }

  ~GpuDevice() override {
    if (faulted_) return;     // communicators aborted, kernels may be stuck: the job is being aborted
    cudaDeviceSynchronize();  // teardown only: every stream idle before freeing what they use
    for (auto c : owned_comms_) ncclCommDestroy(c);
    if (tp_comm_) ncclCommDestroy(tp_comm_);
    if (dp_comm_) ncclCommDestroy(dp_comm_);
    for (auto& [key, c] : pipe_comm_) if (c) ncclCommDestroy(c);
    if (embd_comm_) ncclCommDestroy(embd_comm_);
    for (ncclComm_t c : {row_comm_, col_comm_, depth_comm_})
      if (c) ncclCommDestroy(c);
    gemms_.clear();
    for (auto e : events_) cudaEventDestroy(e);
    for (auto e : start_) cudaEventDestroy(e);
    for (auto e : end_) cudaEventDestroy(e);
    if (t0_) cudaEventDestroy(t0_);
    for (void* p : allocations_) cudaFree(p);
    cudaFree(lt_workspace_);
    cublasDestroy(blas_);
    cublasLtDestroy(lt_);
    for (auto s : streams_) cudaStreamDestroy(s);
  }

  std::string describe() const override {
    const int ranks = o_.tp * o_.dp * o_.pp;
    return cat("cuda (", props_.name, ", ", props_.multiProcessorCount, " SMs, cuBLASLt + NCCL ", NCCL_VERSION_CODE, ", ", ranks,
               " MPI rank", ranks > 1 ? "s" : "", ")");
  }

  void prepare(const sim::StepGraph& g, const LaunchPlan& plan, const DeviceSetup& setup) override {
    g_ = &g;
    setup_ = setup;
    // one CUDA stream per graph stream; each communicator group of the graph on its NCCL communicator
    streams_.resize(g.streams.size());
    for (auto& s : streams_) CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const int lanes = o_.tp * o_.dp;
    if (g.plan.grid_tp()) make_grid_comms(g.plan);
    for (const auto& grp : g.groups) {
      if (grp.name == "row" && row_comm_) group_comm_.push_back(row_comm_);
      else if (grp.name == "col" && col_comm_) group_comm_.push_back(col_comm_);
      else if (grp.name == "depth_dp" && depth_comm_) group_comm_.push_back(depth_comm_);
      else if (grp.name == "tp") group_comm_.push_back(tp_comm_);
      else if (grp.name == "dp") group_comm_.push_back(dp_comm_);
      else if (grp.name == "embd" && embd_comm_) group_comm_.push_back(embd_comm_);
      else if ((grp.name == "pp_fwd" || grp.name == "pp_bwd") && pipe_comm_.count({grp.name == "pp_fwd" ? 0 : 1, grp.instance / lanes}))
        group_comm_.push_back(pipe_comm_.at({grp.name == "pp_fwd" ? 0 : 1, grp.instance / lanes}));  // instance = lane + lanes x boundary
      else throw std::runtime_error(cat("cuda backend: no communicator for group '", grp.name, "'"));
    }
    plan_ = &plan;
    act_ = g.plan.dtype;
    arena_ = static_cast<char*>(alloc(plan_->arena_bytes));
    CUDA_CHECK(cudaMemset(arena_, 0, plan_->arena_bytes));  // gradients start at 0
    attention_scratch_ = static_cast<char*>(alloc(std::max<std::uint64_t>(plan_->attention_scratch_bytes, 256)));
    cast_scratch_ = alloc(std::max<std::uint64_t>(plan_->cast_scratch_bytes, 256));
    std::int64_t max_rows = 1;
    for (const auto& ti : g.tensors) max_rows = std::max(max_rows, ti.rows);
    stats_max_ = static_cast<float*>(alloc(static_cast<std::size_t>(max_rows) * sizeof(float)));

    // one NCCL communicator per (group, stream): collectives of one group issued from two streams
    // (ZeRO: gradient reduce-scatters on dp_comm, parameter gathers on param_comm) may not share one.
    // The first stream of a group uses the group's communicator; later ones new communicators made
    // in task order (the same on every rank; make_comm is collective over MPI_COMM_WORLD).
    for (std::uint32_t i = 0; i < g.size(); ++i) {
      const auto& task = g.tasks[i];
      if (!task.is_collective() || !task.group) continue;
      const auto key = std::make_pair(*task.group, task.stream);
      if (stream_comm_.count(key)) continue;
      bool used = false;
      for (const auto& [k, c] : stream_comm_) used |= k.first == *task.group;
      ncclComm_t c = group_comm_.at(*task.group);
      if (used) {
        const bool tp = g.groups[*task.group].name == "tp";
        const int tp_group = o_.world_rank / o_.tp;
        c = tp ? make_comm(tp_group, tp_rank_, o_.tp, o_.tp_channels) : make_comm(tp_rank_, tp_group, o_.dp);
        owned_comms_.push_back(c);
      }
      stream_comm_.emplace(key, c);
    }
    // ZeRO: the bucket buffers (fp32 packed bucket + this rank's block) of each communication stream
    if (plan.bucket_scratch_bytes > 0)
      for (std::size_t si = 0; si < g.streams.size(); ++si)
        if (g.streams[si].kind == sim::StreamKind::comm) bucket_scratch_[static_cast<sim::StreamId>(si)] = static_cast<char*>(alloc(plan.bucket_scratch_bytes));
    // grids: a reduced weight-gradient partial or one norm statistic per communication stream
    if (plan.grid_scratch_bytes > 0)
      for (std::size_t si = 0; si < g.streams.size(); ++si)
        if (g.streams[si].kind == sim::StreamKind::comm) grid_scratch_[static_cast<sim::StreamId>(si)] = static_cast<char*>(alloc(plan.grid_scratch_bytes));
    // weights: the same step-0 values as every backend (the executor's init_weight), in the run's dtype
    std::map<sim::TensorId, std::vector<ShardPiece>> shard_of;  // ZeRO parameter shards: their pieces
    for (std::uint32_t i = 0; i < g.size(); ++i)
      if (is_dp_bucket_collective(g, i) && g.tasks[i].op == Op::param_gather && !shard_of.count(g.inputs(i)[0]))
        shard_of.emplace(g.inputs(i)[0], shard_pieces(bucket_layout(g, i), g, o_.world_rank / o_.tp));
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      const auto& ti = g.tensors[i];
      if (ti.role == sim::TensorRole::weight) {
        std::vector<float> w;
        if (auto it = shard_of.find(static_cast<sim::TensorId>(i)); it != shard_of.end()) {
          // this rank's part of its bucket's weights (padding stays 0)
          w.assign(static_cast<std::size_t>(ti.rows * ti.cols), 0.0f);
          for (const auto& pc : it->second) {
            const auto full = setup.init_weight(pc.tensor);
            std::copy_n(full.begin() + pc.tensor_offset, pc.count, w.begin() + pc.shard_offset);
          }
        } else {
          w = setup.init_weight(static_cast<sim::TensorId>(i));
        }
        const auto bytes = host_encode(w, ti.dtype);
        CUDA_CHECK(cudaMemcpy(ptr(static_cast<sim::TensorId>(i)), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
        if (ti.dtype != common::DType::fp32) {  // AdamW's fp32 master copy starts from the same values
          float* master = static_cast<float*>(alloc(w.size() * sizeof(float)));
          CUDA_CHECK(cudaMemcpy(master, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
          masters_[static_cast<sim::TensorId>(i)] = master;
        }
      }
      if (ti.role == sim::TensorRole::input && ti.op == Op::embedding) {
        positions_[static_cast<sim::TensorId>(i)] = static_cast<int*>(alloc(static_cast<std::size_t>(ti.rows) * sizeof(int)));
        if (g.plan.grid_tp()) {  // the grid column's q x T tokens and positions (the vocab-parallel embedding)
          const std::size_t n = static_cast<std::size_t>(ti.rows) * static_cast<std::size_t>(g.plan.tp_q);
          column_tokens_[static_cast<sim::TensorId>(i)] = static_cast<int*>(alloc(n * sizeof(int)));
          column_positions_[static_cast<sim::TensorId>(i)] = static_cast<int*>(alloc(n * sizeof(int)));
        }
      }
    }
    // AdamW state: the optimizer's operands pair gradient k with weight k
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (g.tasks[i].op != Op::optimizer) continue;
      auto in = g.inputs(i), out = g.outputs(i);
      for (std::size_t k = 0; k < out.size(); ++k) {
        const auto& w = g.tensors[out[k]];
        Param p{.weight = out[k], .grad = in[k], .count = w.rows * w.cols, .segments = {}};
        if (auto it = shard_of.find(out[k]); it != shard_of.end())
          for (const auto& pc : it->second) p.segments.push_back({pc.shard_offset, pc.count, setup.decays(pc.tensor)});
        else
          p.segments.push_back({0, p.count, setup.decays(out[k])});
        const std::size_t bytes = static_cast<std::size_t>(p.count) * sizeof(float);
        p.m = static_cast<float*>(alloc(bytes));
        p.v = static_cast<float*>(alloc(bytes));
        CUDA_CHECK(cudaMemset(p.m, 0, bytes));
        CUDA_CHECK(cudaMemset(p.v, 0, bytes));
        p.master = w.dtype == common::DType::fp32 ? static_cast<float*>(ptr(out[k])) : masters_.at(out[k]);
        params_.push_back(p);
      }
    }
    // cuBLASLt descriptors and algorithms, once
    gemms_.resize(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto& l = plan_->launches[i];
      if (!l.gemm) continue;
      const auto ab = g.tensors[l.gemm->b].dtype, c = g.tensors[l.gemm->c].dtype;
      gemms_[i] = std::make_unique<cuda::PreparedGemm>(cuda::prepare_gemm(lt_, *l.gemm, ab, c, kLtWorkspaceBytes));
    }
    // events: cross-stream edges (no timing: cheaper) and per-task start / end
    events_.resize(plan_->events);
    for (auto& e : events_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    start_.resize(g.size());
    end_.resize(g.size());
    for (auto& e : start_) CUDA_CHECK(cudaEventCreate(&e));
    for (auto& e : end_) CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventCreate(&t0_));
    issued_.assign(g.size(), false);
    CUDA_CHECK(cudaDeviceSynchronize());  // setup only (before the first step)
  }

  void begin_micro_batch(const std::vector<std::vector<std::int32_t>>& tokens, const std::vector<std::vector<std::int32_t>>& targets,
                         const std::vector<std::vector<std::int32_t>>& positions,
                         const std::vector<std::vector<std::int32_t>>& column_tokens,
                         const std::vector<std::vector<std::int32_t>>& column_positions) override {
    const auto& g = *g_;
    std::fill(issued_.begin(), issued_.end(), false);
    cudaStream_t s = streams_[0];
    // token ids / targets into the graph's input tensors (int32 in a 4-byte slot), positions beside
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      const auto& ti = g.tensors[i];
      if (ti.role != sim::TensorRole::input) continue;
      const int sl = std::max<int>(0, ti.micro) * g.plan.row_slices + std::max<int>(0, ti.slice);  // executor::batch_index
      const auto& src = ti.op == Op::embedding ? tokens.at(sl) : targets.at(sl);
      if (static_cast<std::int64_t>(src.size()) != ti.rows)
        throw std::logic_error(cat("batch slice ", sl, " has ", src.size(), " rows, tensor ", ti.name(), " ", ti.rows));
      // the previous micro-batch ended with its streams synchronised, so staging can be reused
      auto& stage = staging_[i];
      stage = src;
      CUDA_CHECK(cudaMemcpyAsync(ptr(static_cast<sim::TensorId>(i)), stage.data(), stage.size() * sizeof(int), cudaMemcpyHostToDevice, s));
      if (ti.op == Op::embedding) {
        auto& pstage = staging_pos_[i];
        pstage = positions.at(sl);
        CUDA_CHECK(cudaMemcpyAsync(positions_.at(static_cast<sim::TensorId>(i)), pstage.data(), pstage.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, s));
        if (g.plan.grid_tp()) {
          auto& ctok = staging_col_[i];
          auto& cpos = staging_col_pos_[i];
          ctok = column_tokens.at(sl);
          cpos = column_positions.at(sl);
          if (static_cast<std::int64_t>(ctok.size()) != ti.rows * g.plan.tp_q || cpos.size() != ctok.size())
            throw std::logic_error(cat("batch slice ", sl, " has ", ctok.size(), " column tokens, expected ", ti.rows * g.plan.tp_q));
          CUDA_CHECK(cudaMemcpyAsync(column_tokens_.at(static_cast<sim::TensorId>(i)), ctok.data(), ctok.size() * sizeof(int),
                                     cudaMemcpyHostToDevice, s));
          CUDA_CHECK(cudaMemcpyAsync(column_positions_.at(static_cast<sim::TensorId>(i)), cpos.data(), cpos.size() * sizeof(int),
                                     cudaMemcpyHostToDevice, s));
        }
      }
    }
    CUDA_CHECK(cudaEventRecord(t0_, s));
  }

  void issue(std::uint32_t t, std::span<const std::uint32_t> waits) override {
    const auto& l = plan_->launches[t];
    cudaStream_t s = stream(l.stream);
    for (auto u : waits) {
      const auto& producer = plan_->launches[u];
      if (!producer.record)
        throw std::logic_error(cat("cuda backend: ", g_->task_name(t), " waits on ", g_->task_name(u), " which records no event"));
      // the producer recorded its event on its own stream right after it; this stream waits on
      // the GPU, not the host
      CUDA_CHECK(cudaStreamWaitEvent(s, events_[*producer.record], 0));
    }
    CUDA_CHECK(cudaEventRecord(start_[t], s));
    if (std::holds_alternative<hardware::CollectiveOp>(g_->tasks[t].kind)) run_collective(t, s);
    else run_compute(t, s);
    CUDA_CHECK(cudaEventRecord(end_[t], s));
    if (l.record) CUDA_CHECK(cudaEventRecord(events_[*l.record], s));
    issued_[t] = true;
  }

  std::vector<std::pair<std::int64_t, std::int64_t>> end_micro_batch() override {
    for (std::size_t i = 0; i < streams_.size(); ++i) drain(i);
    std::vector<std::pair<std::int64_t, std::int64_t>> timing(g_->size(), {-1, -1});
    for (std::size_t t = 0; t < g_->size(); ++t) {
      if (!issued_[t]) continue;
      float a = 0, b = 0;
      CUDA_CHECK(cudaEventElapsedTime(&a, t0_, start_[t]));
      CUDA_CHECK(cudaEventElapsedTime(&b, t0_, end_[t]));
      timing[t] = {static_cast<std::int64_t>(static_cast<double>(a) * 1e6), static_cast<std::int64_t>(static_cast<double>(b) * 1e6)};
    }
    return timing;
  }

  std::vector<float> read_tensor(sim::TensorId id) override {
    const auto& ti = g_->tensors[id];
    const auto& slot = plan_->tensors[id];
    std::vector<unsigned char> raw(slot.bytes);
    CUDA_CHECK(cudaMemcpy(raw.data(), ptr(id), slot.bytes, cudaMemcpyDeviceToHost));
    const std::size_t n = static_cast<std::size_t>(ti.rows * ti.cols);
    std::vector<float> out(n);
    if (ti.role == sim::TensorRole::input) {  // int32 token ids
      for (std::size_t i = 0; i < n; ++i) {
        std::int32_t v;
        std::memcpy(&v, raw.data() + 4 * i, 4);
        out[i] = static_cast<float>(v);
      }
      return out;
    }
    const int b = common::dtype_bytes(ti.dtype);
    for (std::size_t i = 0; i < n; ++i) out[i] = host_float(raw.data() + i * b, ti.dtype);
    return out;
  }

 private:
  /// Waits for stream `i` to drain, polling (cudaStreamQuery, sleeping 50 us between polls) so that
  /// the watchdog can see a stream stuck on an NCCL collective whose peer stopped: after
  /// o_.watchdog_s seconds, or on an asynchronous NCCL error, every communicator is aborted
  /// (ncclCommAbort: the stuck kernels return) and the error names the ranks waited on.
  void drain(std::size_t i) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t q = cudaStreamQuery(streams_[i]);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) CUDA_CHECK(q);
      std::vector<ncclComm_t> comms{tp_comm_, dp_comm_, row_comm_, col_comm_, depth_comm_};
      comms.insert(comms.end(), owned_comms_.begin(), owned_comms_.end());  // ZeRO's per-stream communicators
      for (ncclComm_t c : comms) {
        ncclResult_t async = ncclSuccess;
        if (c && ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess) {
          abort_comms();
          throw std::runtime_error(cat("NCCL: asynchronous error on stream ", stream_name(i), ": ", ncclGetErrorString(async)));
        }
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (o_.watchdog_s > 0 && waited > o_.watchdog_s) {
        abort_comms();
        throw std::runtime_error(cat("the ", stream_name(i), " stream made no progress for ", waited, " s waiting on ", peers(i),
                                     " (watchdog, --watchdog-s; is that rank stopped, hung or dead?)"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void abort_comms() {
    faulted_ = true;
    if (tp_comm_) ncclCommAbort(tp_comm_);
    if (dp_comm_) ncclCommAbort(dp_comm_);
    for (ncclComm_t c : owned_comms_) ncclCommAbort(c);
    for (ncclComm_t c : {row_comm_, col_comm_, depth_comm_})
      if (c) ncclCommAbort(c);
    tp_comm_ = dp_comm_ = row_comm_ = col_comm_ = depth_comm_ = nullptr;
    owned_comms_.clear();
    stream_comm_.clear();
    group_comm_.assign(group_comm_.size(), nullptr);
  }
  std::string stream_name(std::size_t i) const { return g_->streams[i].name; }
  /// The world ranks this rank's work on stream `i` waits on: the peers of the group its
  /// collectives run on (the first collective task on the stream names it; compute: tp) - its TP
  /// group (ranks g*tp .. g*tp + tp - 1), or its DP group (tp_rank + k*tp).
  std::string peers(std::size_t i) const {
    std::string group = "tp";
    for (const auto& task : g_->tasks)
      if (task.stream == i && task.group) {
        group = g_->groups[*task.group].name;
        break;
      }
    std::string out;
    if (const auto it = grid_members_.find(group); it != grid_members_.end()) {
      for (int r : it->second)
        if (r != o_.world_rank) out += cat(out.empty() ? "" : ", ", r);
      return out.empty() ? "no other rank" : cat(out.find(',') == std::string::npos ? "rank " : "ranks ", out);
    }
    const bool dp = group == "dp";
    const int n = dp ? o_.dp : o_.tp;
    for (int k = 0; k < n; ++k) {
      const int r = dp ? tp_rank_ + k * o_.tp : (o_.world_rank / o_.tp) * o_.tp + k;
      if (r != o_.world_rank) out += cat(out.empty() ? "" : ", ", r);
    }
    return out.empty() ? "no other rank" : cat(out.find(',') == std::string::npos ? "rank " : "ranks ", out);
  }

  /// `channels` > 0: the communicator's NCCL channels pinned (ncclConfig_t minCTAs = maxCTAs: one
  /// CTA per channel), the plan's tp_channels; 0: NCCL's choice.
  ncclComm_t make_comm(int color, int key, int size, int channels = 0) {
    MPI_Comm sub;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &sub));
    ncclComm_t comm = nullptr;
    if (size > 1) {
      int sub_rank = 0, sub_size = 0;
      MPI_CHECK(MPI_Comm_rank(sub, &sub_rank));
      MPI_CHECK(MPI_Comm_size(sub, &sub_size));
      if (sub_size != size) throw std::runtime_error(cat("cuda backend: communicator of ", sub_size, " ranks, expected ", size));
      ncclUniqueId id;
      if (sub_rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
      MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, sub));
      if (channels > 0) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.minCTAs = channels;
        config.maxCTAs = channels;
        NCCL_CHECK(ncclCommInitRankConfig(&comm, size, id, sub_rank, &config));
      } else {
        NCCL_CHECK(ncclCommInitRank(&comm, size, id, sub_rank));
      }
    }
    MPI_CHECK(MPI_Comm_free(&sub));
    return comm;
  }

  /// 2D / 2.5D: NCCL communicators of the grid row (ranks ordered by column), column (ordered by
  /// row) and, with depth, depth x dp (world rank = tp rank + tp x dp rank; pp = 1), the simulator's
  /// groups (sim/builder_grid.cpp). Collective over MPI_COMM_WORLD (prepare runs on every rank).
  void make_grid_comms(const sim::Plan& p) {
    const int q = p.tp_q, d = p.tp_d, base = o_.world_rank - tp_rank_, dp_rank = o_.world_rank / o_.tp;
    const auto at = p.grid_coord(tp_rank_);
    grid_row_ = at.row;
    grid_col_ = at.col;
    const int layer = (o_.world_rank / o_.tp) * d + at.depth;
    const bool rows_inner = p.tp_grid_order == sim::TpGridOrder::row;
    auto tp_rank_of = [&](int row, int col) { return (rows_inner ? col + q * row : row + q * col) + q * q * at.depth; };
    for (int k = 0; k < q; ++k) {
      grid_members_["row"].push_back(base + tp_rank_of(at.row, k));
      grid_members_["col"].push_back(base + tp_rank_of(k, at.col));
    }
    row_comm_ = make_comm(layer * q + at.row, at.col, q);
    col_comm_ = make_comm(layer * q + at.col, at.row, q);
    if (d > 1) {
      for (int r = 0; r < o_.dp; ++r)
        for (int k = 0; k < d; ++k) grid_members_["depth_dp"].push_back(tp_rank_ % (q * q) + k * q * q + r * o_.tp);
      depth_comm_ = make_comm(tp_rank_ % (q * q), dp_rank * d + at.depth, d * o_.dp);
    }
  }

  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    allocations_.push_back(p);
    return p;
  }
  void* ptr(sim::TensorId id) const { return arena_ + plan_->tensors[id].offset; }
  template <typename T> T* as(sim::TensorId id) const { return static_cast<T*>(ptr(id)); }
  cudaStream_t stream(sim::StreamId s) const { return streams_[s]; }

  void run_compute(std::uint32_t t, cudaStream_t s) {
    switch (act_) {
      case common::DType::fp32: return run_compute_as<float>(t, s);
      case common::DType::bf16: return run_compute_as<__nv_bfloat16>(t, s);
      case common::DType::fp16: return run_compute_as<__half>(t, s);
      case common::DType::fp8: break;
    }
    throw std::logic_error("cuda backend: fp8 plans are refused by check_cuda_plan");
  }
  template <typename T> void run_compute_as(std::uint32_t t, cudaStream_t s);
  void run_collective(std::uint32_t t, cudaStream_t s);
  template <typename T> void run_grid_norm_collective(std::uint32_t t, cudaStream_t s, ncclComm_t comm);

  DeviceOptions o_;
  int device_ = 0, tp_rank_ = 0;
  cudaDeviceProp props_{};
  std::vector<cudaStream_t> streams_;  // indexed by sim::StreamId (the graph's streams; the first is compute)
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* lt_workspace_ = nullptr;
  ncclComm_t tp_comm_ = nullptr, dp_comm_ = nullptr, embd_comm_ = nullptr;
  ncclComm_t row_comm_ = nullptr, col_comm_ = nullptr, depth_comm_ = nullptr;  // 2D / 2.5D grids
  int grid_row_ = 0, grid_col_ = 0;                                           // this rank's place on the grid
  std::map<std::string, std::vector<int>> grid_members_;                     // world ranks of row / col / depth_dp
  std::map<sim::StreamId, char*> grid_scratch_;                               // grids: per communication stream
  std::map<sim::TensorId, int*> column_tokens_, column_positions_;           // grids: the column's tokens per embedding input
  std::map<std::size_t, std::vector<std::int32_t>> staging_col_, staging_col_pos_;
  /// Which vocabulary block this rank's logits hold: its TP rank, on a grid its column.
  int vocab_rank() const { return g_ && g_->plan.grid_tp() ? grid_col_ : tp_rank_; }
  std::map<std::pair<int, int>, ncclComm_t> pipe_comm_;  // (direction 0 fwd / 1 bwd, boundary) -> its two-rank communicator
  std::vector<ncclComm_t> group_comm_;  // indexed by sim::GroupId
  bool faulted_ = false;                // the watchdog aborted the communicators
  std::map<std::pair<sim::GroupId, sim::StreamId>, ncclComm_t> stream_comm_;  // per (group, stream) issuing on it
  std::vector<ncclComm_t> owned_comms_;  // the extra ones among them
  std::map<sim::StreamId, char*> bucket_scratch_;  // ZeRO bucket buffers per communication stream

  const sim::StepGraph* g_ = nullptr;
  DeviceSetup setup_;
  const LaunchPlan* plan_ = nullptr;
  common::DType act_ = common::DType::bf16;
  std::vector<void*> allocations_;
  char* arena_ = nullptr;
  char* attention_scratch_ = nullptr;
  void* cast_scratch_ = nullptr;
  float* stats_max_ = nullptr;
  std::map<sim::TensorId, int*> positions_;
  std::map<sim::TensorId, float*> masters_;  // fp32 master weights of bf16 / fp16 runs
  std::map<std::size_t, std::vector<std::int32_t>> staging_, staging_pos_;
  std::vector<Param> params_;
  int opt_step_ = 0;
  std::vector<std::unique_ptr<cuda::PreparedGemm>> gemms_;
  std::vector<cudaEvent_t> events_, start_, end_;
  cudaEvent_t t0_ = nullptr;
  std::vector<bool> issued_;
};

template <typename T>
void GpuDevice::run_compute_as(std::uint32_t t, cudaStream_t s) {
  const auto& g = *g_;
  const auto& task = g.tasks[t];
  const auto& l = plan_->launches[t];
  const auto& m = g.model;
  auto in = g.inputs(t);
  auto out = g.outputs(t);
  const auto T_ = [&](sim::TensorId id) -> const sim::TensorInfo& { return g.tensors[id]; };
  const bool rms = m.norm == sim::Norm::rmsnorm;
  const int H = static_cast<int>(m.hidden), h = H / (g.plan.grid_tp() ? g.plan.tp_q : 1);  // a grid rank holds h = H/q columns
  switch (l.kind) {
    case LaunchKind::gemm: {
      const auto& c = *l.gemm;
      const void* a = ptr(c.a);
      if (c.cast_a) {  // fp32 dlogits -> the activation dtype, so that both GEMM inputs match
        cuda::cast_forward<T>(as<float>(c.a), static_cast<T*>(cast_scratch_), T_(c.a).rows * T_(c.a).cols, s);
        a = cast_scratch_;
      }
      if (!c.parts.empty()) {  // a decomposed TP site's pieces: the same prepared GEMM on row blocks (executor/tp_pieces.hpp)
        for (const auto& p : c.parts) {
          auto at = [&](sim::TensorId id, std::int64_t offset) {
            return static_cast<char*>(ptr(id)) + offset * common::dtype_bytes(T_(id).dtype);
          };
          cuda::matmul_forward(lt_, *gemms_[t], at(p.a, p.a_offset), at(p.b, p.b_offset), at(p.c, p.c_offset), lt_workspace_,
                               kLtWorkspaceBytes, s);
        }
        return;
      }
      const char* b = static_cast<const char*>(ptr(c.b)) + c.b_offset * common::dtype_bytes(T_(c.b).dtype);
      cuda::matmul_forward(lt_, *gemms_[t], a, b, ptr(c.c), lt_workspace_, kLtWorkspaceBytes, s);
      return;
    }
    case LaunchKind::attention_forward:
    case LaunchKind::attention_backward: {
      const auto& op = std::get<hardware::AttentionOp>(task.kind);
      const cuda::AttentionDims d{.batch = op.batch, .heads = op.heads, .kv_heads = op.kv_heads, .seq = op.s_q, .head_dim = op.head_dim,
                                  .rope = m.position == sim::Position::rope};
      const auto layout = cuda::attention_layout(op, sizeof(T));
      if (l.kind == LaunchKind::attention_forward) {  // inputs {qkv}, outputs {ctx, probs}
        cuda::attention_forward<T>(blas_, as<T>(in[0]), as<T>(out[0]), attention_scratch_, layout, d, s, as<T>(out[1]));
      } else {  // inputs {qkv, ctx, probs, dctx}, outputs {dqkv}
        cuda::attention_backward<T>(blas_, as<T>(in[0]), as<T>(in[in.size() - 1]), as<T>(out[0]), attention_scratch_, layout, d, s,
                                    as<T>(in[in.size() - 2]));
      }
      return;
    }
    case LaunchKind::flash_attention_forward:
    case LaunchKind::flash_attention_backward: {
      const auto& op = std::get<hardware::AttentionOp>(task.kind);
      const cuda::AttentionDims d{.batch = op.batch, .heads = op.heads, .kv_heads = op.kv_heads, .seq = op.s_q, .head_dim = op.head_dim,
                                  .rope = m.position == sim::Position::rope};
      if (l.kind == LaunchKind::flash_attention_forward) {  // inputs {qkv}, outputs {ctx, lse}
        cuda::flash_attention_forward<T>(as<T>(in[0]), as<T>(out[0]), as<float>(out[1]), d, s);
      } else {  // inputs {qkv, ctx, lse, dctx}, outputs {dqkv}
        cuda::flash_attention_backward<T>(as<T>(in[0]), as<T>(in[in.size() - 3]), as<float>(in[in.size() - 2]), as<T>(in[in.size() - 1]),
                                          as<T>(out[0]), attention_scratch_, cuda::flash_attention_layout(op), d, s);
      }
      return;
    }
    case LaunchKind::norm_forward:  // inputs {x, w}, outputs {y}
      cuda::norm_forward<T>(rms, as<T>(in[0]), as<T>(in[1]), as<T>(out[0]), T_(in[0]).rows, h, s);
      return;
    case LaunchKind::norm_backward:  // inputs {d_out, x, w (, residual dy)}, outputs {dx, dw}
      cuda::norm_backward<T>(rms, as<T>(in[0]), as<T>(in[1]), as<T>(in[2]), in.size() > 3 ? as<T>(in[3]) : nullptr, as<T>(out[0]),
                             as<float>(out[1]), T_(in[0]).rows, h, props_.multiProcessorCount, s);
      return;
    case LaunchKind::activation_forward:
      if (m.activation == sim::Activation::gelu) cuda::gelu_forward<T>(as<T>(in[0]), as<T>(out[0]), T_(in[0]).rows * T_(in[0]).cols, s);
      else cuda::swiglu_forward<T>(as<T>(in[0]), as<T>(out[0]), T_(in[0]).rows, T_(out[0]).cols, s);
      return;
    case LaunchKind::activation_backward:  // inputs {f1, da}, outputs {df1}
      if (m.activation == sim::Activation::gelu)
        cuda::gelu_backward<T>(as<T>(in[0]), as<T>(in[1]), as<T>(out[0]), T_(in[0]).rows * T_(in[0]).cols, s);
      else cuda::swiglu_backward<T>(as<T>(in[0]), as<T>(in[1]), as<T>(out[0]), T_(in[0]).rows, T_(in[1]).cols, s);
      return;
    case LaunchKind::residual_forward: {  // inputs {x, partial_0, ...}, outputs {out}
      if (in.size() > 2 && T_(in[1]).cols == h) {  // TE's token chunks: partial k holds rows [k n/C, (k + 1) n/C)
        const long long rows = T_(in[1]).rows;
        for (std::size_t k = 1; k < in.size(); ++k) {
          cuda::Partials<T> one;
          one.p[one.count++] = as<T>(in[k]);
          const long long at = static_cast<long long>(k - 1) * rows * h;
          cuda::residual_forward<T>(as<T>(in[0]) + at, one, as<T>(out[0]) + at, rows, h, s);
        }
        return;
      }
      cuda::Partials<T> parts;
      if (in.size() - 1 > static_cast<std::size_t>(cuda::Partials<T>::kMax))
        throw std::logic_error("cuda backend: more column chunks than residual_forward takes");
      for (std::size_t k = 1; k < in.size(); ++k) parts.p[parts.count++] = as<T>(in[k]);
      cuda::residual_forward<T>(as<T>(in[0]), parts, as<T>(out[0]), T_(out[0]).rows, h, s);
      return;
    }
    case LaunchKind::partial_sum: {  // inputs j x tp + o: sub-chunk j of out = the sum over o, one partial a launch (then in place)
      const int tp = g.plan.tp;
      const long long rows = T_(in[0]).rows, cols = T_(in[0]).cols;
      for (int j = 0; j < l.subs; ++j) {
        T* oj = as<T>(out[0]) + static_cast<long long>(j) * rows * cols;
        for (int k = 1; k < tp; ++k) {
          cuda::Partials<T> one;
          one.p[one.count++] = as<T>(in[static_cast<std::size_t>(j * tp + k)]);
          cuda::residual_forward<T>(k == 1 ? as<T>(in[static_cast<std::size_t>(j * tp)]) : oj, one, oj, rows, cols, s);
        }
      }
      return;
    }
    case LaunchKind::embedding_forward: {  // inputs {tokens, w_emb (, w_pos)}, outputs {x}
      const long long vl = T_(in[1]).rows;
      if (g.plan.grid_tp()) {  // the column's q x T tokens in vocabulary block `row`; positions added once (row 0) before the column's reduce-scatter
        const T* pos_w = in.size() > 2 && grid_row_ == 0 ? as<T>(in[2]) : nullptr;
        cuda::embedding_forward<T>(column_tokens_.at(in[0]), column_positions_.at(in[0]), as<T>(in[1]), pos_w, grid_row_ * vl, vl,
                                   as<T>(out[0]), T_(out[0]).rows, h, s);
        return;
      }
      const T* pos_w = in.size() > 2 && tp_rank_ == 0 ? as<T>(in[2]) : nullptr;  // positions added once per TP group
      cuda::embedding_forward<T>(as<int>(in[0]), positions_.at(in[0]), as<T>(in[1]), pos_w, tp_rank_ * vl, vl, as<T>(out[0]),
                                 T_(in[0]).rows, h, s);
      return;
    }
    case LaunchKind::embedding_backward: {  // inputs {dy, tokens}, outputs {d_emb (, d_pos)}
      const long long vl = T_(out[0]).rows;
      if (g.plan.grid_tp()) {  // dy gathered over the column: the column's q x T tokens
        cuda::embedding_backward<T>(column_tokens_.at(in[1]), column_positions_.at(in[1]), as<T>(in[0]), as<float>(out[0]),
                                    out.size() > 1 ? as<float>(out[1]) : nullptr, grid_row_ * vl, vl, T_(in[0]).rows, h, s);
        return;
      }
      cuda::embedding_backward<T>(as<int>(in[1]), positions_.at(in[1]), as<T>(in[0]), as<float>(out[0]),
                                  out.size() > 1 ? as<float>(out[1]) : nullptr, tp_rank_ * vl, vl, T_(in[1]).rows, h, s);
      return;
    }
    case LaunchKind::cross_entropy_stats: {  // inputs {logits, targets}, outputs {stats}
      const auto& L = T_(in[0]);
      cuda::cross_entropy_stats(as<float>(in[0]), as<int>(in[1]), vocab_rank() * L.cols, L.cols, as<float>(out[0]), L.rows, s);
      return;
    }
    case LaunchKind::cross_entropy_loss: {  // inputs {logits, stats, targets}, outputs {dlogits, loss}
      const auto& L = T_(in[0]);
      const float scale = 1.0f / static_cast<float>(setup_.tokens_per_step);
      cuda::cross_entropy_loss(as<float>(in[0]), as<float>(in[1]), as<int>(in[2]), vocab_rank() * L.cols, L.cols, scale, as<float>(out[0]),
                               as<float>(out[1]), L.rows, s);
      return;
    }
    case LaunchKind::grid_norm_forward:  // inputs {x, w, stats}, outputs {y}
      cuda::grid_norm_forward<T>(rms, as<T>(in[0]), as<T>(in[1]), as<float>(in[2]), as<T>(out[0]), T_(in[0]).rows, h, H, s);
      return;
    case LaunchKind::grid_norm_backward:  // inputs {d_out, x, w (, residual dy)}, outputs {dx, dw}
      cuda::grid_norm_backward<T>(rms, as<T>(in[0]), as<T>(in[1]), as<T>(in[2]), in.size() > 3 ? as<T>(in[3]) : nullptr,
                                  as<float>(l.stats), as<float>(l.sums), as<T>(out[0]), as<float>(out[1]), T_(in[0]).rows, h, H,
                                  props_.multiProcessorCount, s);
      return;
    case LaunchKind::adamw: {
      ++opt_step_;
      const auto& a = setup_.adamw;
      const AdamWParams o{.lr = a.lr, .beta1 = a.beta1, .beta2 = a.beta2, .eps = a.eps, .weight_decay = a.weight_decay};
      for (const auto& p : params_)
        for (const auto& sg : p.segments)
          cuda::adamw_update<T>(o, opt_step_, p.master + sg.offset, as<T>(p.weight) + sg.offset, as<float>(p.grad) + sg.offset,
                                p.m + sg.offset, p.v + sg.offset, sg.count, sg.decay, s);
      return;
    }
    default: break;
  }
  throw std::logic_error(cat("cuda backend: ", g.task_name(t), " is not a compute launch"));
}

void GpuDevice::run_collective(std::uint32_t t, cudaStream_t s) {
  const auto& g = *g_;
  const auto& task = g.tasks[t];
  const auto& l = plan_->launches[t];
  ncclComm_t comm = task.group ? stream_comm_.at({*task.group, task.stream}) : nullptr;
  if (!comm) throw std::logic_error(cat("cuda backend: ", g.task_name(t), " has no communicator"));
  auto in = g.inputs(t), out = g.outputs(t);
  const auto count = [&](sim::TensorId id) { return static_cast<std::size_t>(g.tensors[id].rows * g.tensors[id].cols); };
  switch (l.kind) {
    case LaunchKind::all_reduce:
      if (task.op == Op::loss_comm) {  // (max, sum-exp, target) triples: max first, then rescaled sums
        const long long n = g.tensors[out[0]].rows;
        float* stats = as<float>(out[0]);
        cuda::stats_max(stats, stats_max_, n, s);
        NCCL_CHECK(ncclAllReduce(stats_max_, stats_max_, static_cast<std::size_t>(n), ncclFloat, ncclMax, comm, s));
        cuda::stats_rescale(stats, stats_max_, n, vocab_rank() == 0, s);  // a grid: the row's column 0
        NCCL_CHECK(ncclAllReduce(stats, stats, static_cast<std::size_t>(n) * 3, ncclFloat, ncclSum, comm, s));
        return;
      }
      NCCL_CHECK(ncclGroupStart());  // in place; a DP bucket is several tensors
      for (auto id : out) NCCL_CHECK(ncclAllReduce(ptr(id), ptr(id), count(id), nccl_dtype(g.tensors[id].dtype), ncclSum, comm, s));
      NCCL_CHECK(ncclGroupEnd());
      return;
    case LaunchKind::all_gather:
      NCCL_CHECK(ncclAllGather(ptr(in[0]), ptr(out[0]), count(in[0]), nccl_dtype(g.tensors[in[0]].dtype), comm, s));
      return;
    case LaunchKind::reduce_scatter:
      NCCL_CHECK(ncclReduceScatter(ptr(in[0]), ptr(out[0]), count(out[0]), nccl_dtype(g.tensors[out[0]].dtype), ncclSum, comm, s));
      return;
    case LaunchKind::send_recv: {  // a two-rank communicator per boundary: the peer is its other rank
      int me = 0;
      NCCL_CHECK(ncclCommUserRank(comm, &me));
      if (!in.empty()) NCCL_CHECK(ncclSend(ptr(in[0]), count(in[0]), nccl_dtype(g.tensors[in[0]].dtype), 1 - me, comm, s));
      else NCCL_CHECK(ncclRecv(ptr(out[0]), count(out[0]), nccl_dtype(g.tensors[out[0]].dtype), 1 - me, comm, s));
      return;
    }
    case LaunchKind::tp_exchange: {  // a decomposed TP site's step (executor/tp_pieces.hpp): send to a TP rank, receive from one
      if (l.send_to == tp_rank_ && l.recv_from == tp_rank_) {  // FLUX's local rows on Hopper: no peer, a copy on the stream
        CUDA_CHECK(cudaMemcpyAsync(ptr(out[0]), ptr(in[0]), static_cast<std::size_t>(g.tensors[in[0]].bytes()), cudaMemcpyDeviceToDevice, s));
        return;
      }
      NCCL_CHECK(ncclGroupStart());
      NCCL_CHECK(ncclSend(ptr(in[0]), count(in[0]), nccl_dtype(g.tensors[in[0]].dtype), l.send_to, comm, s));
      NCCL_CHECK(ncclRecv(ptr(out[0]), count(out[0]), nccl_dtype(g.tensors[out[0]].dtype), l.recv_from, comm, s));
      NCCL_CHECK(ncclGroupEnd());
      return;
    }
    case LaunchKind::broadcast:  // a SUMMA step's block from rank `root` of the row / column (the root's input is its output too)
      NCCL_CHECK(ncclBroadcast(ptr(in[0]), ptr(out[0]), count(out[0]), nccl_dtype(g.tensors[out[0]].dtype), l.root, comm, s));
      return;
    case LaunchKind::reduce: {  // the partials onto rank `root`: its input-gradient block (set), or its weight gradient (+=)
      const auto dt = g.tensors[in[0]].dtype;
      int me = 0;
      NCCL_CHECK(ncclCommUserRank(comm, &me));
      if (!l.accumulate) {
        NCCL_CHECK(ncclReduce(ptr(in[0]), ptr(out[1]), count(in[0]), nccl_dtype(dt), ncclSum, l.root, comm, s));
        return;
      }
      char* sum = grid_scratch_.at(task.stream);
      NCCL_CHECK(ncclReduce(ptr(in[0]), sum, count(in[0]), nccl_dtype(dt), ncclSum, l.root, comm, s));
      if (me != l.root) return;
      const long long n = static_cast<long long>(count(in[0]));
      switch (dt) {
        case common::DType::fp32: cuda::accumulate_fp32<float>(as<float>(out[1]), reinterpret_cast<const float*>(sum), n, s); return;
        case common::DType::bf16: cuda::accumulate_fp32<__nv_bfloat16>(as<float>(out[1]), reinterpret_cast<const __nv_bfloat16*>(sum), n, s); return;
        case common::DType::fp16: cuda::accumulate_fp32<__half>(as<float>(out[1]), reinterpret_cast<const __half*>(sum), n, s); return;
        case common::DType::fp8: break;
      }
      throw std::logic_error("cuda backend: fp8 plans are refused by check_cuda_plan");
    }
    case LaunchKind::grid_norm_stats:
    case LaunchKind::grid_norm_sums:
      switch (act_) {
        case common::DType::fp32: return run_grid_norm_collective<float>(t, s, comm);
        case common::DType::bf16: return run_grid_norm_collective<__nv_bfloat16>(t, s, comm);
        case common::DType::fp16: return run_grid_norm_collective<__half>(t, s, comm);
        case common::DType::fp8: break;
      }
      throw std::logic_error("cuda backend: fp8 plans are refused by check_cuda_plan");
    case LaunchKind::bucket_reduce_scatter: {  // ZeRO: pack, reduce-scatter, add into the shard, zero the gradients
      const BucketLayout b = bucket_layout(g, t);
      char* scratch = bucket_scratch_.at(task.stream);
      float* packed = reinterpret_cast<float*>(scratch);
      float* block = reinterpret_cast<float*>(scratch + (static_cast<std::uint64_t>(b.shard) * g.plan.dp * 4 + 255) / 256 * 256);
      CUDA_CHECK(cudaMemsetAsync(packed, 0, static_cast<std::size_t>(b.shard) * g.plan.dp * 4, s));
      for (std::size_t k = 0; k < b.tensors.size(); ++k) {
        const std::size_t bytes = count(b.tensors[k]) * 4;
        CUDA_CHECK(cudaMemcpyAsync(packed + b.offsets[k], ptr(b.tensors[k]), bytes, cudaMemcpyDeviceToDevice, s));
        CUDA_CHECK(cudaMemsetAsync(ptr(b.tensors[k]), 0, bytes, s));
      }
      NCCL_CHECK(ncclReduceScatter(packed, block, static_cast<std::size_t>(b.shard), ncclFloat, ncclSum, comm, s));
      cuda::shard_accumulate(as<float>(out[0]), block, b.shard, s);
      return;
    }
    case LaunchKind::param_all_gather: {  // ZeRO: gather every rank's shard, unpack into the bucket's weights
      const BucketLayout b = bucket_layout(g, t);
      const int eb = common::dtype_bytes(g.tensors[in[0]].dtype);
      char* packed = bucket_scratch_.at(task.stream);
      NCCL_CHECK(ncclAllGather(ptr(in[0]), packed, static_cast<std::size_t>(b.shard), nccl_dtype(g.tensors[in[0]].dtype), comm, s));
      for (std::size_t k = 0; k < b.tensors.size(); ++k)
        CUDA_CHECK(cudaMemcpyAsync(ptr(b.tensors[k]), packed + b.offsets[k] * eb, count(b.tensors[k]) * eb, cudaMemcpyDeviceToDevice, s));
      return;
    }
    default: break;
  }
  throw std::logic_error(cat("cuda backend: ", g.task_name(t), " is not a collective"));
}

// A norm's row statistics on a grid (executor/grid_pieces.hpp): the local part on this
// communication stream, then the row's sum.
template <typename T>
void GpuDevice::run_grid_norm_collective(std::uint32_t t, cudaStream_t s, ncclComm_t comm) {
  const auto& g = *g_;
  const auto& l = plan_->launches[t];
  auto in = g.inputs(t), out = g.outputs(t);
  const bool rms = g.model.norm == sim::Norm::rmsnorm;
  const int H = static_cast<int>(g.model.hidden), h = H / g.plan.tp_q;
  const long long n = g.tensors[out[0]].rows;
  float* stats = as<float>(out[0]);
  if (l.kind == LaunchKind::grid_norm_stats) {  // inputs {x}, outputs {stats}: statistic `part` into its column
    float* v = reinterpret_cast<float*>(grid_scratch_.at(g.tasks[t].stream));
    cuda::grid_norm_stats<T>(rms, l.part, as<T>(in[0]), stats, v, n, h, H, s);
    NCCL_CHECK(ncclAllReduce(v, v, static_cast<std::size_t>(n), ncclFloat, ncclSum, comm, s));
    cuda::grid_stats_scatter(v, stats, l.part, n, s);
    return;
  }
  // the norm backward's operands {d_out, x, w, ...} and the forward's statistics -> (sum dxhat, sum dxhat . xhat)
  const auto norm_in = g.inputs(l.norm_task);
  cuda::grid_norm_backward_sums<T>(rms, as<T>(norm_in[0]), as<T>(norm_in[1]), as<T>(norm_in[2]), as<float>(l.stats), stats, n, h, H, s);
  NCCL_CHECK(ncclAllReduce(stats, stats, static_cast<std::size_t>(2 * n), ncclFloat, ncclSum, comm, s));
}

}  // namespace

std::unique_ptr<Device> Device::open(const DeviceOptions& options) { return std::make_unique<GpuDevice>(options); }

}  // namespace executor::cuda
