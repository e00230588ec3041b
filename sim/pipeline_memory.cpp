// Memory of a pipeline stage: weights of what it holds, and the activations of the passes it keeps
// between their forward and backward, counted from its schedule.
#include <vector>

#include "sim/memory.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/step_graph.hpp"

namespace sim {

MemoryEstimate estimate_stage_memory(const StepGraph& g) {
  MemoryEstimate m;
  const int vp = g.plan.vp;
  std::vector<char> saved(g.tensors.size(), 0);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    if (g.tasks[i].phase == Phase::fwd) continue;
    for (TensorId x : g.inputs(i))
      if (g.tensors[x].role == TensorRole::activation) saved[x] = 1;
  }
  // saved activation bytes of one pass per chunk: micro-batch 0's (every micro-batch saves the same)
  std::vector<double> pass_bytes(static_cast<std::size_t>(vp), 0.0);
  for (std::size_t x = 0; x < g.tensors.size(); ++x) {
    const auto& t = g.tensors[x];
    const double n = static_cast<double>(t.rows) * static_cast<double>(t.cols);
    switch (t.role) {
      case TensorRole::weight:
        m.weights += t.bytes();
        m.optimizer += 12.0 * n;
        break;
      case TensorRole::weight_grad:
        m.gradients += t.bytes();
        break;
      case TensorRole::activation:
        if (saved[x] && t.micro == 0 && t.model_chunk >= 0) pass_bytes[static_cast<std::size_t>(t.model_chunk)] += t.bytes();
        break;
      default:
        break;
    }
  }
  const PipelinePosition pos = pipeline_position(g.plan, g.rank);
  const auto order = pipeline_order(g.plan.schedule, g.plan.pp, vp, g.plan.grad_accum_steps(), pos.stage);
  const auto peak = peak_in_flight(in_flight_frontier(order, vp), pass_bytes);
  for (int c = 0; c < vp; ++c) m.activations += peak[static_cast<std::size_t>(c)] * pass_bytes[static_cast<std::size_t>(c)];
  return m;
}

}  // namespace sim
