// The interference model: compute and communication on one GPU slow each other while they overlap
// (the rates of hardware/interference.hpp, per simulated rank).
#include <algorithm>

#include "hardware/interference.hpp"
#include "sim/engine_model.hpp"

namespace sim {

namespace {

class InterferenceModel final : public EngineModel {
 public:
  explicit InterferenceModel(const hardware::CostModel& cost)
      : spec_(cost.cluster().interference), hbm_bytes_per_ps_(cost.cluster().gpu.hbm_bytes_per_s * 1e-12) {}

  void update_rates(EngineView& view) override {
    auto acts = view.activities;
    // A collective spanning simulated ranks moves at one rate - its slowest member's - so with
    // several ranks the factors are collected first and applied per flow.
    const bool joint = view.ranks.size() > 1;
    if (joint) factor_.assign(acts.size(), 1.0);
    bool slowed = false;
    for (const auto& rank : view.ranks) {
      double comm_sm = 0, comm_wire = 0;  // SM share the collectives hold; bytes per ps they move
      bool comm = false;
      for (StreamId s : rank.comm_streams) {
        const int ai = rank.running[s];
        if (ai == EngineView::kIdle) continue;
        comm = true;
        const Activity& a = acts[static_cast<std::size_t>(ai)];
        comm_sm += a.cost->sm_fraction;
        if (a.stage == Stage::transfer)
          for (const LinkUse& u : a.cost->wire) comm_wire += a.rate * u.bytes_per_ps;
      }
      if (!comm) continue;
      double f = 1.0;  // the collectives' speed beside the most memory-bound kernel running
      bool computing = false;
      for (StreamId s : rank.compute_streams) {
        const int ci = rank.running[s];
        if (ci == EngineView::kIdle) continue;
        Activity& c = acts[static_cast<std::size_t>(ci)];
        const double u = c.cost->hbm_util;
        c.rate = hardware::compute_rate_beside_comm(spec_, hbm_bytes_per_ps_ * 1e12, u, comm_sm, comm_wire * 1e12);
        const double fc = hardware::comm_rate_beside_compute(spec_, u);
        f = computing ? std::min(f, fc) : fc;
        computing = true;
      }
      if (!computing) continue;
      for (StreamId s : rank.comm_streams) {
        const int ai = rank.running[s];
        if (ai == EngineView::kIdle || acts[static_cast<std::size_t>(ai)].stage != Stage::transfer) continue;
        if (joint)
          factor_[static_cast<std::size_t>(ai)] = f;
        else
          acts[static_cast<std::size_t>(ai)].rate *= f;
        slowed = true;
      }
    }
    if (!joint || !slowed) return;
    for (std::size_t i = 0; i < acts.size(); ++i) {
      if (acts[i].stage != Stage::transfer) continue;
      double f = factor_[i];
      for (std::size_t j = 0; j < acts.size(); ++j)
        if (acts[j].flow == acts[i].flow) f = std::min(f, factor_[j]);
      if (f != 1.0) acts[i].rate *= f;
    }
  }

 private:
  hardware::InterferenceSpec spec_;
  double hbm_bytes_per_ps_;
  std::vector<double> factor_;  // several ranks: per activity, its slowdown factor on its own rank
};

}  // namespace

std::unique_ptr<EngineModel> make_interference_model(const hardware::CostModel& cost) {
  return std::make_unique<InterferenceModel>(cost);
}

}  // namespace sim
