// The link-sharing model: a link is a constraint, a transfer a variable (SimGrid's network model on
// sim::MaxMinSystem, which knows nothing about networks).
#include <algorithm>

#include "sim/engine_model.hpp"
#include "sim/maxmin.hpp"

namespace sim {

namespace {

class LinkSharingModel final : public EngineModel {
 public:
  void update_rates(EngineView& view) override {
    auto acts = view.activities;
    lmm_.clear();
    var_.resize(acts.size());
    for (auto& v : var_) v = -1;
    flows_.clear();
    const bool joint = view.ranks.size() > 1;
    link_.resize(view.link_bytes_per_ps.size());
    for (std::size_t r = 0; r < view.ranks.size(); ++r) {
      for (auto& l : link_) l = -1;
      for (std::size_t i = 0; i < acts.size(); ++i) {
        const Activity& a = acts[i];
        if (a.stage != Stage::transfer || a.rank != static_cast<int>(r)) continue;
        int v = -1;
        if (joint)  // the same collective on another simulated rank: one variable on both ranks' links
          for (const auto& [flow, var] : flows_)
            if (flow == a.flow) v = var;
        if (v < 0) {
          v = lmm_.add_variable(1.0);
          if (joint) flows_.emplace_back(a.flow, v);
        }
        var_[i] = v;
        for (const LinkUse& u : a.cost->wire) {
          if (link_[u.link] < 0) link_[u.link] = lmm_.add_constraint(view.link_bytes_per_ps[u.link]);
          lmm_.expand(link_[u.link], v, u.bytes_per_ps);
        }
      }
    }
    if (lmm_.variables() == 0) return;
    lmm_.solve();
    for (std::size_t i = 0; i < acts.size(); ++i)
      if (var_[i] >= 0) acts[i].rate = lmm_.value(var_[i]);
  }

 private:
  MaxMinSystem lmm_;
  std::vector<int> var_;                              // per activity: its variable, -1 if not transferring
  std::vector<int> link_;                             // per link class of the current rank: its constraint, -1 if none yet
  std::vector<std::pair<std::uint32_t, int>> flows_;  // flow -> variable (several simulated ranks)
};

}  // namespace

std::unique_ptr<EngineModel> make_link_sharing_model(const hardware::CostModel&) { return std::make_unique<LinkSharingModel>(); }

std::vector<ModelFactory> default_models() { return {make_link_sharing_model, make_interference_model}; }

}  // namespace sim
