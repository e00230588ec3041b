// defines: sim::MaxMinSystem (max-min fair sharing of capacities among variables; knows nothing
//          about networks, as SimGrid's lmm solver: a link is a constraint, a transfer a variable)
#pragma once
#include <cstdint>
#include <vector>

namespace sim {

/// @brief A linear max-min fairness problem: variables x_v in [0, bound_v], constraints
/// sum_v usage(c, v) * x_v <= capacity_c. solve() finds the max-min fair allocation by progressive
/// filling: all unfrozen variables grow at the same pace; when a constraint saturates, the
/// variables using it freeze; when a variable reaches its bound, it freezes alone.
/// Example: two variables of bound 1 both using one constraint of capacity 1 get 0.5 each.
/// Reusable: clear() keeps the allocations. Not thread-safe (one per simulation).
class MaxMinSystem {
 public:
  /// @brief Adds a constraint; returns its index.
  int add_constraint(double capacity);
  /// @brief Adds a variable bounded above by `bound` (> 0); returns its index.
  int add_variable(double bound);
  /// @brief Variable `v` consumes `usage` (> 0) of constraint `c` per unit of its value.
  void expand(int c, int v, double usage);
  /// @brief Computes every variable's value.
  void solve();
  double value(int v) const { return value_[static_cast<std::size_t>(v)]; }
  std::size_t variables() const { return value_.size(); }
  void clear();

 private:
  struct Use {
    int c, v;
    double usage;
  };
  std::vector<double> capacity_, bound_, value_;
  std::vector<Use> uses_;
  std::vector<char> frozen_;
  std::vector<double> used_, demand_;
};

}  // namespace sim
