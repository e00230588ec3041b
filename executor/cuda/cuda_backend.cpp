// executor::make_cuda_backend: the Backend interface (executor/backend.hpp) over a cuda::Device.
// Plain C++: the plan checks, the launch list and the executor's shared init code run here; every
// CUDA call is behind cuda::Device (device.cu).
#include <fmt/format.h>

#include "executor/backend.hpp"
#include "executor/cuda/device.hpp"
#include "executor/cuda/launch_plan.hpp"
#include "common/config_reader.hpp"

namespace executor {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& o)
      : o_(o),
        device_(cuda::Device::open({.world_rank = o.world_rank, .tp = o.tp, .dp = o.dp, .pp = o.pp, .pipeline_wraps = o.pipeline_wraps,
                                    .tp_channels = o.tp_channels, .device = o.device, .watchdog_s = o.watchdog_s})) {}

  std::string describe() const override { return device_->describe(); }

  void prepare(const sim::StepGraph& g, const TrainingOptions& t) override {
    if (auto why = cuda::check_cuda_plan(g.model, g.plan)) throw common::ConfigError("--backend cuda", "plan", *why);
    g_ = &g;
    const int tp_rank = o_.world_rank % o_.tp;
    plan_ = cuda::plan_launches(g, tp_rank);
    cuda::DeviceSetup setup{
        .init_weight = [&g, tp_rank, seed = t.seed](sim::TensorId id) { return init_weight(g, id, tp_rank, seed); },
        .decays = [&g](sim::TensorId id) { return decays(g.tensors[id]); },
        .adamw = {.lr = static_cast<float>(t.lr), .beta1 = static_cast<float>(t.beta1), .beta2 = static_cast<float>(t.beta2),
                  .eps = static_cast<float>(t.eps), .weight_decay = static_cast<float>(t.weight_decay)},
        .tokens_per_step = tokens_per_step(g.plan)};
    device_->prepare(g, plan_, setup);
  }

  void begin_micro_batch(const Batch& batch) override {
    device_->begin_micro_batch(batch.tokens, batch.targets, batch.positions, batch.column_tokens, batch.column_positions);
  }

  void issue(std::uint32_t t, std::span<const std::uint32_t> waits) override { device_->issue(t, waits); }

  void end_micro_batch(std::vector<TaskClock>& timing) override {
    const auto ns = device_->end_micro_batch();
    timing.resize(ns.size());
    for (std::size_t i = 0; i < ns.size(); ++i) timing[i] = {ns[i].first, ns[i].second};
  }

  double loss_sum() override {
    double s = 0;
    for (std::size_t i = 0; i < g_->tensors.size(); ++i) {
      const auto& ti = g_->tensors[i];
      if (ti.op == sim::Op::loss && ti.role == sim::TensorRole::activation)
        for (float v : device_->read_tensor(static_cast<sim::TensorId>(i))) s += v;
    }
    return s;
  }

  std::vector<float> read_tensor(sim::TensorId id) override { return device_->read_tensor(id); }

 private:
  BackendOptions o_;
  std::unique_ptr<cuda::Device> device_;
  const sim::StepGraph* g_ = nullptr;
  cuda::LaunchPlan plan_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) { return std::make_unique<CudaBackend>(options); }

}  // namespace executor
