#include "hardware/interference.hpp"

#include <algorithm>
#include <cmath>

#include "hardware/gemm_model.hpp"

namespace hardware {

ConcurrentRates share_hbm(double usable, double compute_demand, double comm_demand) {
  ConcurrentRates r;
  if (compute_demand + comm_demand <= usable || usable <= 0) return r;
  const double half = usable / 2;
  if (comm_demand <= half) {
    r.compute = (usable - comm_demand) / compute_demand;
  } else if (compute_demand <= half) {
    r.comm = (usable - compute_demand) / comm_demand;
  } else {
    r.compute = half / compute_demand;
    r.comm = half / comm_demand;
  }
  return r;
}

ConcurrentRates rates_beside(const InterferenceSpec& spec, double usable_hbm, const KernelLoad& k, const CommLoad& c) {
  ConcurrentRates r;
  // SMs: the kernel runs on the SMs the collective's CTAs leave
  const double on_fewer = c.sms > 0 && spec.sm_contention ? std::max(k.seconds_on_fewer, k.seconds) : k.seconds;
  const double sm_rate = k.seconds > 0 ? k.seconds / on_fewer : 1.0;
  // the collective's channels beside a kernel on the other SMs: slowed by a compute-bound kernel
  // (tensor-core GEMMs load L2 and the SM-to-memory crossbar); beside a memory-bound one it holds
  // its HBM share and the kernel yields (below)
  const double solo_hbm_util = k.seconds > 0 && usable_hbm > 0 ? std::min(1.0, k.hbm_bytes / k.seconds / usable_hbm) : 0.0;
  const double comm_rate = c.sms > 0 ? 1.0 - spec.sm_comm_slowdown * (1.0 - solo_hbm_util) : 1.0;
  // HBM: each at the speed it would run otherwise, then a max-min share of what is usable
  const double compute_demand = on_fewer > 0 ? k.hbm_bytes / on_fewer : 0.0;
  const double comm_demand = spec.hbm_amplification * c.wire_bytes_per_s * comm_rate;
  const ConcurrentRates h = share_hbm(usable_hbm, compute_demand, comm_demand);
  r.compute = sm_rate * h.compute;
  r.comm = comm_rate * h.comm;
  return r;
}

double gemm_seconds_on_sms(const GpuSpec& gpu, const GemmOp& op, int sms) {
  if (sms >= gpu.sm_count || sms <= 0) return estimate_gemm(gpu, op).seconds;
  GpuSpec fewer = gpu;
  const double f = static_cast<double>(sms) / gpu.sm_count;
  for (auto& p : fewer.peak_flops_per_s) p *= f;  // the same per-SM speed on fewer SMs
  fewer.sm_count = sms;
  return estimate_gemm(fewer, op).seconds;
}

double seconds_on_fewer_sms(double seconds, double hbm_share, int sms, int taken) {
  if (taken <= 0 || sms <= 0) return seconds;
  const double u = std::clamp(hbm_share, 0.0, 1.0);
  const double sm_bound = taken < sms ? static_cast<double>(sms) / (sms - taken) : 2.0;
  return seconds * (u + (1 - u) * sm_bound);
}

double copy_engine_seconds(const InterferenceSpec& spec, double latency_s, double transfer_s) {
  return latency_s + transfer_s / spec.copy_engine_bandwidth;
}

OverlapTiming overlap(const InterferenceSpec& spec, double usable_hbm, const KernelLoad& k, const CommLoad& c, IssueOrder order,
                      bool single_connection, double gemm_waves) {
  OverlapTiming t;
  // when the collective's CTAs can start
  double comm_start = 0;
  bool fewer_sms = true;  // whether the kernel still has waves to place on the SMs left
  if (order == IssueOrder::compute_first && c.sms > 0) {
    const double waves = std::max(1.0, gemm_waves);
    if (single_connection) {
      // in issue order: the collective waits for SMs until the kernel's last wave is placed
      comm_start = waves > 1 ? k.seconds * (waves - 1) / waves : k.seconds;
      fewer_sms = false;
    } else {
      // interleaved: its CTAs take SMs as the first wave's CTAs finish
      comm_start = waves > 1 ? k.seconds / waves : k.seconds;
    }
  }
  t.comm_start_s = comm_start;
  // phase 0: the kernel alone until the collective starts
  double k_left = 1.0, c_left = 1.0;  // fractions of solo work
  double now = std::min(comm_start, k.seconds);
  k_left -= now / k.seconds;
  if (k_left <= 1e-12) {
    t.compute_s = k.seconds;
    t.comm_s = comm_start + c.seconds;
    t.total_s = std::max(t.compute_s, t.comm_s);
    return t;
  }
  now = comm_start;
  // phase 1: both
  KernelLoad kk = k;
  if (!fewer_sms) kk.seconds_on_fewer = kk.seconds;  // its last wave is already placed
  const ConcurrentRates r = rates_beside(spec, usable_hbm, kk, c);
  const double k_time = k_left * k.seconds / r.compute, c_time = c_left * c.seconds / r.comm;
  const double both = std::min(k_time, c_time);
  now += both;
  k_left -= both * r.compute / k.seconds;
  c_left -= both * r.comm / c.seconds;
  // phase 2: the one left, alone
  if (k_time <= c_time) {
    t.compute_s = now;
    t.comm_s = now + std::max(0.0, c_left) * c.seconds;
  } else {
    t.comm_s = now;
    t.compute_s = now + std::max(0.0, k_left) * k.seconds;
  }
  t.total_s = std::max(t.compute_s, t.comm_s);
  return t;
}

}  // namespace hardware
