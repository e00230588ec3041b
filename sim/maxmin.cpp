#include "sim/maxmin.hpp"

#include <algorithm>
#include <limits>

namespace sim {

int MaxMinSystem::add_constraint(double capacity) {
  capacity_.push_back(capacity);
  return static_cast<int>(capacity_.size() - 1);
}

int MaxMinSystem::add_variable(double bound) {
  bound_.push_back(bound);
  value_.push_back(0.0);
  return static_cast<int>(bound_.size() - 1);
}

void MaxMinSystem::expand(int c, int v, double usage) {
  if (usage > 0) uses_.push_back({c, v, usage});
}

void MaxMinSystem::clear() {
  capacity_.clear();
  bound_.clear();
  value_.clear();
  uses_.clear();
}

void MaxMinSystem::solve() {
  const std::size_t nv = bound_.size(), nc = capacity_.size();
  frozen_.assign(nv, 0);
  used_.assign(nc, 0.0);
  std::fill(value_.begin(), value_.end(), 0.0);
  std::size_t left = nv;
  double level = 0;  // common value of every unfrozen variable
  while (left > 0) {
    demand_.assign(nc, 0.0);
    for (const auto& u : uses_)
      if (!frozen_[u.v]) demand_[u.c] += u.usage;
    // the next event: a constraint saturates or an unfrozen variable reaches its bound
    double next = std::numeric_limits<double>::infinity();
    for (std::size_t v = 0; v < nv; ++v)
      if (!frozen_[v]) next = std::min(next, bound_[v]);
    for (std::size_t c = 0; c < nc; ++c)
      if (demand_[c] > 0) next = std::min(next, level + std::max(0.0, capacity_[c] - used_[c]) / demand_[c]);
    const double step = next - level;
    for (std::size_t c = 0; c < nc; ++c) used_[c] += step * demand_[c];
    level = next;
    for (std::size_t v = 0; v < nv; ++v)
      if (!frozen_[v]) value_[v] = level;
    // freeze variables at their bound and every variable of a saturated constraint
    constexpr double kEps = 1e-12;
    for (std::size_t v = 0; v < nv; ++v)
      if (!frozen_[v] && bound_[v] <= level * (1 + kEps)) {
        frozen_[v] = 1;
        --left;
      }
    for (const auto& u : uses_)
      if (!frozen_[u.v] && demand_[u.c] > 0 && used_[u.c] >= capacity_[u.c] * (1 - kEps)) {
        frozen_[u.v] = 1;
        --left;
      }
  }
}

}  // namespace sim
