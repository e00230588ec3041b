#include "sim/memory.hpp"

#include <vector>

#include "sim/step_graph.hpp"

namespace sim {

MemoryEstimate estimate_memory(const StepGraph& g) {
  MemoryEstimate m;
  std::vector<char> saved(g.tensors.size(), 0);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    if (g.tasks[i].phase == Phase::fwd) continue;
    for (TensorId x : g.inputs(i))
      if (g.tensors[x].role == TensorRole::activation) saved[x] = 1;
  }
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
        if (saved[x]) m.activations += t.bytes();
        break;
      default:
        break;
    }
  }
  return m;
}

}  // namespace sim
