#include "hardware/profiled_cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "hardware/collective_model.hpp"
#include "hardware/interference.hpp"

namespace hardware {

namespace {

/// Sorted (x, y) samples with positive x and y; y at x is log-linear between neighbours.
struct Curve {
  std::vector<std::pair<double, double>> pts;

  void add(double x, double y) { pts.emplace_back(x, y); }
  void finalize() {
    std::sort(pts.begin(), pts.end());
    // equal x measured twice: keep their geometric mean so the curve stays a function
    std::vector<std::pair<double, double>> out;
    for (std::size_t i = 0; i < pts.size();) {
      std::size_t j = i;
      double log_sum = 0;
      while (j < pts.size() && pts[j].first == pts[i].first) log_sum += std::log(pts[j++].second);
      out.emplace_back(pts[i].first, std::exp(log_sum / static_cast<double>(j - i)));
      i = j;
    }
    pts = std::move(out);
  }
  bool covers(double x) const { return !pts.empty() && x >= pts.front().first && x <= pts.back().first; }
  double at(double x) const {
    auto hi = std::lower_bound(pts.begin(), pts.end(), std::make_pair(x, -1e300));
    if (hi->first == x) return hi->second;
    auto lo = hi - 1;
    const double t = (std::log(x) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
    return std::exp(std::log(lo->second) + t * (std::log(hi->second) - std::log(lo->second)));
  }
  std::string range() const { return pts.empty() ? "nothing" : fmt::format("{:g} .. {:g}", pts.front().first, pts.back().first); }
};

/// Index i with a[i] <= x <= a[i+1] (a sorted, x inside); t the log-space position in that cell.
std::pair<std::size_t, double> cell(const std::vector<std::int64_t>& a, double x) {
  if (a.size() == 1) return {0, 0.0};
  std::size_t i = 0;
  while (i + 2 < a.size() && static_cast<double>(a[i + 1]) <= x) ++i;
  const double lo = std::log(static_cast<double>(a[i])), hi = std::log(static_cast<double>(a[i + 1]));
  return {i, (std::log(x) - lo) / (hi - lo)};
}

std::int64_t pad(std::int64_t x, int tile) { return (x + tile - 1) / tile * tile; }

enum class Fallback : int { gemm, attention, elementwise, optimizer, collective };
constexpr std::array<const char*, 5> kFallbackNames{"GEMM", "attention", "element-wise", "optimizer", "collective"};

class ProfiledCostModel final : public CostModel {
 public:
  ProfiledCostModel(const ClusterSpec& cluster, Profile p, std::ostream* notes, Stack stack)
      : cluster_(apply_profile_overrides(cluster, p)), analytic_(make_analytic_cost_model(cluster_, stack)), profile_(std::move(p)),
        notes_(notes ? notes : &std::cerr) {
    if (profile_.host && profile_.host->collective_handoff_us) handoff_ = common::Duration::from_us(*profile_.host->collective_handoff_us);
    for (const auto& g : profile_.gemm) gemm_exact_[{g.dtype, g.m, g.n, g.k}] = g.us;
    for (const auto& a : profile_.attention) {
      AttentionOp op{.batch = a.batch, .heads = a.heads, .kv_heads = a.heads, .s_q = a.s, .s_kv = a.s, .head_dim = a.head_dim,
                     .causal = true, .backward = a.backward, .dtype = a.dtype};
      attention_[{a.dtype, a.backward, a.head_dim}].add(op.executed_flops(), a.us);
    }
    for (const auto& e : profile_.elementwise) elementwise_[{e.kind, e.backward}].add(static_cast<double>(e.elements), e.us);
    for (const auto& o : profile_.optimizer) optimizer_.add(static_cast<double>(o.params), o.us);
    for (const auto& c : profile_.collectives)
      collectives_[{c.kind, c.ranks, c.nodes}].add(static_cast<double>(c.bytes), c.us);
    for (const auto& c : profile_.collectives_beside_compute)
      beside_compute_[{c.kind, c.ranks, c.nodes}].add(static_cast<double>(c.bytes), c.us);
    for (auto& [k, c] : beside_compute_) c.finalize();
    for (auto& [k, c] : attention_) c.finalize();
    for (auto& [k, c] : elementwise_) c.finalize();
    for (auto& [k, c] : collectives_) c.finalize();
    optimizer_.finalize();
  }

  ComputeCost gemm(const GemmOp& op) const override {
    const common::DType d = runs_as(op.dtype);
    double us_one = 0;
    if (auto it = gemm_exact_.find({d, op.m, op.n, op.k}); it != gemm_exact_.end()) {
      us_one = it->second;
    } else if (auto v = gemm_grid(d, op)) {
      us_one = *v;
    } else {
      note(Fallback::gemm, fmt::format("{} m={} n={} k={} (grid m {}..{}, n {}..{}, k {}..{})", to_string(op.dtype), op.m, op.n, op.k,
                                       front(profile_.grid_m), back(profile_.grid_m), front(profile_.grid_n), back(profile_.grid_n),
                                       front(profile_.grid_k), back(profile_.grid_k)));
      return analytic_->gemm(op);
    }
    return {common::Duration::from_us(us_one * static_cast<double>(op.batch)), op.bytes()};
  }

  ComputeCost attention(const AttentionOp& op) const override {
    auto it = attention_.find({runs_as(op.dtype), op.backward, op.head_dim});
    const double x = op.executed_flops();
    if (it == attention_.end() || !it->second.covers(x)) {
      note(Fallback::attention, fmt::format("{} head_dim={} at {:g} FLOP (measured {})", op.backward ? "backward" : "forward",
                                            op.head_dim, x, it == attention_.end() ? "nothing for this head_dim" : it->second.range()));
      return analytic_->attention(op);
    }
    return {common::Duration::from_us(it->second.at(x)), op.bytes()};
  }

  ComputeCost elementwise(const ElementwiseOp& op) const override {
    auto it = elementwise_.find({std::string(to_string(op.kind)), op.backward});
    if (it == elementwise_.end()) it = elementwise_.find({"stream", false});  // measured bandwidth + call cost
    const double x = static_cast<double>(op.elements);
    if (it == elementwise_.end() || !it->second.covers(x)) {
      note(Fallback::elementwise, fmt::format("{}{} over {} elements (measured {})", to_string(op.kind), op.backward ? " backward" : "",
                                              op.elements, it == elementwise_.end() ? "nothing" : it->second.range()));
      return analytic_->elementwise(op);
    }
    return {common::Duration::from_us(it->second.at(x)), op.bytes};
  }

  ComputeCost optimizer(const OptimizerOp& op) const override {
    const double x = static_cast<double>(op.params);
    if (!optimizer_.covers(x)) {
      note(Fallback::optimizer, fmt::format("{} parameters (measured {})", op.params, optimizer_.range()));
      return analytic_->optimizer(op);
    }
    return {common::Duration::from_us(optimizer_.at(x)), op.bytes()};
  }

  // The measured time replaces the analytic total; the analytic model still says which links the
  // bytes cross (for link sharing) and how many SMs it holds. Latency: the table's smallest-size time.
  CollectiveCost collective(const CollectiveOp& op) const override {
    CollectiveCost c = analytic_->collective(op);
    if (op.ranks <= 1) return c;
    if (profile_.info.backend == "cpu") c.sms = cluster_.gpu.sm_count;  // the communication thread takes the rank's core
    auto it = collectives_.find({op.kind, op.ranks, op.nodes});
    // the backend moves elements of the dtype it computes in (CPU: fp32 for a bf16 plan)
    const double x = static_cast<double>(op.bytes) * common::dtype_bytes(runs_as(op.dtype)) / common::dtype_bytes(op.dtype);
    if (it == collectives_.end() || !it->second.covers(x)) {
      note(Fallback::collective, fmt::format("{} over {} ranks on {} node(s), {:g} bytes (measured {})", to_string(op.kind), op.ranks,
                                             op.nodes, x, it == collectives_.end() ? "nothing for this group" : it->second.range()));
      return c;
    }
    // CPU: the executor always runs a collective beside the rank's compute, through its sleeping
    // poll loop; where the profile measured that, its time is the whole cost. It is all latency
    // stage, which the engine does not slow again beside compute (the measurement already did).
    // Of that time the communication thread holds the rank's core only while MPI moves the data,
    // about the direct table's time; the rest it sleeps between polls. The engine takes whole
    // "SMs" (one per CPU rank), so that share is rounded: the collective takes the core from
    // compute only when it is busy at least half of its time.
    if (auto b = beside_compute_.find({op.kind, op.ranks, op.nodes}); b != beside_compute_.end() && b->second.covers(x)) {
      const double beside_us = b->second.at(x), busy_share = it->second.at(x) / beside_us;
      c.sms = busy_share >= 0.5 ? cluster_.gpu.sm_count : 0;
      c.latency = common::Duration::from_us(beside_us) + handoff_;
      c.transfer = common::Duration{};
      return c;
    }
    const common::Duration total = common::Duration::from_us(it->second.at(x));
    const common::Duration latency = std::min(total, common::Duration::from_us(it->second.pts.front().second));
    c.latency = latency + handoff_;  // the consumer sees completion only after the thread hand-offs
    c.transfer = total - latency;
    return c;
  }

  const ClusterSpec& cluster() const override { return cluster_; }
  Stack stack() const override { return analytic_->stack(); }
  std::string describe() const override { return "profiled: " + (profile_.source.empty() ? std::string("(in memory)") : profile_.source); }

 private:
  common::DType runs_as(common::DType t) const {
    auto it = profile_.runs_as.find(t);
    return it == profile_.runs_as.end() ? t : it->second;
  }

  static std::int64_t front(const std::vector<std::int64_t>& a) { return a.empty() ? 0 : a.front(); }
  static std::int64_t back(const std::vector<std::int64_t>& a) { return a.empty() ? 0 : a.back(); }

  /// Trilinear interpolation in (log m, log n, log k) of log(throughput of the tile-padded problem),
  /// then time = padded FLOPs / throughput: exact at grid points, steps at tile boundaries.
  std::optional<double> gemm_grid(common::DType d, const GemmOp& op) const {
    const auto& gm = profile_.grid_m;
    const auto& gn = profile_.grid_n;
    const auto& gk = profile_.grid_k;
    if (gm.empty() || gn.empty() || gk.empty()) return std::nullopt;
    auto inside = [](const std::vector<std::int64_t>& a, std::int64_t x) { return x >= a.front() && x <= a.back(); };
    if (!inside(gm, op.m) || !inside(gn, op.n) || !inside(gk, op.k)) return std::nullopt;
    if (!gemm_exact_.count({d, gm[0], gn[0], gk[0]})) return std::nullopt;  // dtype not measured
    const int tm = profile_.gemm_tile_m, tn = profile_.gemm_tile_n;
    auto log_rate = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
      const double us = gemm_exact_.at({d, m, n, k});
      return std::log(2.0 * static_cast<double>(pad(m, tm)) * static_cast<double>(pad(n, tn)) * static_cast<double>(k) / us);
    };
    const auto [im, tm_] = cell(gm, static_cast<double>(op.m));
    const auto [in, tn_] = cell(gn, static_cast<double>(op.n));
    const auto [ik, tk_] = cell(gk, static_cast<double>(op.k));
    double lr = 0;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        for (int c = 0; c < 2; ++c) {
          const double w = (a ? tm_ : 1 - tm_) * (b ? tn_ : 1 - tn_) * (c ? tk_ : 1 - tk_);
          if (w == 0) continue;
          lr += w * log_rate(gm[std::min(im + a, gm.size() - 1)], gn[std::min(in + b, gn.size() - 1)], gk[std::min(ik + c, gk.size() - 1)]);
        }
    const double padded_flops = 2.0 * static_cast<double>(pad(op.m, tm)) * static_cast<double>(pad(op.n, tn)) * static_cast<double>(op.k);
    return padded_flops / std::exp(lr);
  }

  void note(Fallback f, const std::string& what) const {
    if (noted_[static_cast<int>(f)].exchange(true)) return;
    std::lock_guard lock(notes_mutex_);
    *notes_ << fmt::format("slicetune: note: profile {} has no {} measurement for {}; using the analytic model outside the measured "
                           "range (said once per run)\n",
                           profile_.source.empty() ? "(in memory)" : profile_.source, kFallbackNames[static_cast<int>(f)], what);
  }

  ClusterSpec cluster_;
  std::unique_ptr<CostModel> analytic_;
  Profile profile_;
  std::ostream* notes_;
  common::Duration handoff_{};
  std::map<std::tuple<common::DType, std::int64_t, std::int64_t, std::int64_t>, double> gemm_exact_;
  std::map<std::tuple<common::DType, bool, std::int64_t>, Curve> attention_;
  std::map<std::pair<std::string, bool>, Curve> elementwise_;
  Curve optimizer_;
  std::map<std::tuple<CollectiveKind, int, int>, Curve> collectives_;
  std::map<std::tuple<CollectiveKind, int, int>, Curve> beside_compute_;
  mutable std::array<std::atomic<bool>, 5> noted_{};
  mutable std::mutex notes_mutex_;
};

}  // namespace

ClusterSpec apply_profile_overrides(ClusterSpec c, const Profile& p) {
  const bool cpu = p.info.backend == "cpu";
  if (p.host) {
    const common::Duration launch = common::Duration::from_us(p.host->launch_us);
    if (cpu)
      for (auto& st : c.host.stacks) st.launch = launch;
    else c.host.stacks[static_cast<int>(Stack::cpp)].launch = launch;
  }
  if (p.interference) {
    const auto& m = *p.interference;
    // CPU: one rank per core, so when the measured GEMM slows by more than half beside a collective the
    // communication thread is time-sharing the rank's core: while a collective runs, compute gets
    // half the core (two runnable threads: hardware::seconds_on_fewer_sms with the collective holding
    // the rank's one "SM", see collective()). Otherwise it has a core of its own.
    if (cpu) c.interference.sm_contention = m.compute_slowdown() > 0.5;
    // The engine prices both sides with rates_beside (hardware/interference.hpp). The collective beside
    // the GEMM: 1 - sm_comm_slowdown x (1 - the GEMM's HBM share alone) of its speed, so the measured
    // collective slowdown gives sm_comm_slowdown. The GEMM beside the collective: on the SMs it leaves,
    // at a max-min share of HBM with hbm_amplification x the collective's sent bytes: amp solved by
    // bisection so the engine reproduces the measured GEMM slowdown (0 when the SM term alone does).
    const auto base = make_analytic_cost_model(c, Stack::cpp);
    GemmOp g{.m = m.gemm.m, .n = m.gemm.n, .k = m.gemm.k, .dtype = m.gemm.dtype};
    CollectiveOp co{.kind = m.collective.kind, .bytes = m.collective.bytes, .ranks = m.collective.ranks, .nodes = m.collective.nodes};
    const auto cc = base->collective(co);
    const double usable = c.gpu.hbm_bytes_per_s * c.gpu.memory_efficiency;
    const double gemm_s = m.gemm.us * 1e-6;
    const double u = usable > 0 ? std::min(1.0, g.bytes() / gemm_s / usable) : 0.0;
    c.interference.sm_comm_slowdown = u < 1 ? std::clamp(m.comm_slowdown() / (1 - u), 0.0, 0.95) : 0.0;
    const int sms = cpu ? c.gpu.sm_count : cc.sms;
    const KernelLoad kernel{.seconds = gemm_s, .seconds_on_fewer = seconds_on_fewer_sms(gemm_s, u, c.gpu.sm_count, sms), .hbm_bytes = g.bytes()};
    const CommLoad comm{.seconds = m.collective.us * 1e-6, .wire_bytes_per_s = cc.sent_bytes / (m.collective.us * 1e-6), .sms = sms};
    const double target = 1.0 / (1.0 + std::max(0.0, m.compute_slowdown()));
    auto rate_at = [&](double amp) {
      InterferenceSpec spec = c.interference;
      spec.hbm_amplification = amp;
      return rates_beside(spec, usable, kernel, comm).compute;
    };
    double lo = 0, hi = 10;  // the cluster file's range
    if (rate_at(lo) <= target) hi = lo;
    else if (rate_at(hi) >= target) lo = hi;
    for (int i = 0; i < 60 && hi - lo > 1e-9; ++i) {
      const double mid = (lo + hi) / 2;
      (rate_at(mid) > target ? lo : hi) = mid;
    }
    c.interference.hbm_amplification = (lo + hi) / 2;
  }
  return c;
}

std::unique_ptr<CostModel> make_profiled_cost_model(const ClusterSpec& cluster, Profile profile, std::ostream* notes, Stack stack) {
  return std::make_unique<ProfiledCostModel>(cluster, std::move(profile), notes, stack);
}

std::unique_ptr<CostModel> make_cost_model(const ClusterSpec& cluster, const std::string& profile_path, Stack stack) {
  if (profile_path.empty()) return make_analytic_cost_model(cluster, stack);
  return make_profiled_cost_model(cluster, load_profile(profile_path), nullptr, stack);
}

}  // namespace hardware
