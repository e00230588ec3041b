// The interference model: compute and communication on one GPU slow each other while they overlap,
// by the mechanisms of hardware/interference.hpp (rates_beside), per simulated rank.
#include <algorithm>
#include <map>
#include <utility>

#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"
#include "sim/engine_model.hpp"

namespace sim {

namespace {

class InterferenceModel final : public EngineModel {
 public:
  explicit InterferenceModel(const hardware::CostModel& cost)
      : spec_(cost.cluster().interference),
        gpu_(cost.cluster().gpu),
        hbm_bytes_per_s_(gpu_.hbm_bytes_per_s),
        usable_hbm_bytes_per_s_(gpu_.hbm_bytes_per_s * gpu_.memory_efficiency) {}

  void update_rates(EngineView& view) override {
    auto acts = view.activities;
    // A collective spanning simulated ranks moves at one rate - its slowest member's - so with
    // several ranks the factors are collected first and applied per flow.
    const bool joint = view.ranks.size() > 1;
    if (joint) factor_.assign(acts.size(), 1.0);
    bool slowed = false;
    for (const auto& rank : view.ranks) {
      // the collectives running on this rank, as one load: the SMs their CTAs hold (latency stage
      // included: the CTAs are resident) and the bytes they send (transfer stage, at their present rate)
      hardware::CommLoad comm;
      bool any = false;
      for (StreamId s : rank.comm_streams) {
        const int ai = rank.running[s];
        if (ai == EngineView::kIdle) continue;
        any = true;
        const Activity& a = acts[static_cast<std::size_t>(ai)];
        comm.sms += a.cost->sms;
        if (a.stage == Stage::transfer) comm.wire_bytes_per_s += a.rate * a.cost->sent_bytes_per_ps * 1e12;
      }
      if (!any) continue;
      double f = 1.0;  // the collectives' speed beside the kernel that slows them most
      bool computing = false;
      for (StreamId s : rank.compute_streams) {
        const int ci = rank.running[s];
        if (ci == EngineView::kIdle) continue;
        Activity& c = acts[static_cast<std::size_t>(ci)];
        const double seconds = static_cast<double>(c.cost->first_ps) * 1e-12;
        if (seconds <= 0) continue;
        const hardware::KernelLoad k{.seconds = seconds,
                                     .seconds_on_fewer = seconds * on_fewer_sms(*c.cost, comm.sms),
                                     .hbm_bytes = c.cost->hbm_util * hbm_bytes_per_s_ * seconds};
        const auto r = hardware::rates_beside(spec_, usable_hbm_bytes_per_s_, k, comm);
        c.rate *= r.compute;
        f = computing ? std::min(f, r.comm) : r.comm;
        computing = true;
      }
      if (!computing || f == 1.0) continue;
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
  // How much longer a kernel takes on the SMs `taken` SMs leave. A GEMM: wave quantization of its
  // tiles on the SMs left (hardware::gemm_seconds_on_sms). Another kernel, or a GEMM beside a
  // collective that holds every SM (a CPU rank's core): hardware::seconds_on_fewer_sms.
  double on_fewer_sms(const TaskCost& c, int taken) {
    if (taken <= 0 || !spec_.sm_contention) return 1.0;
    const int sms = gpu_.sm_count;
    if (c.gemm && taken < sms) {
      const auto key = std::make_pair(&c, taken);
      if (auto it = gemm_ratio_.find(key); it != gemm_ratio_.end()) return it->second;
      const double alone = hardware::estimate_gemm(gpu_, *c.gemm).seconds;
      const double ratio = alone > 0 ? std::max(1.0, hardware::gemm_seconds_on_sms(gpu_, *c.gemm, sms - taken) / alone) : 1.0;
      gemm_ratio_.emplace(key, ratio);
      return ratio;
    }
    return hardware::seconds_on_fewer_sms(1.0, c.hbm_util * hbm_bytes_per_s_ / usable_hbm_bytes_per_s_, sms, taken);
  }

  hardware::InterferenceSpec spec_;
  hardware::GpuSpec gpu_;
  double hbm_bytes_per_s_, usable_hbm_bytes_per_s_;
  std::vector<double> factor_;  // several ranks: per activity, its slowdown factor on its own rank
  std::map<std::pair<const TaskCost*, int>, double> gemm_ratio_;  // a GEMM's time on fewer SMs / alone
};

}  // namespace

std::unique_ptr<EngineModel> make_interference_model(const hardware::CostModel& cost) {
  return std::make_unique<InterferenceModel>(cost);
}

}  // namespace sim
