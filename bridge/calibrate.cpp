#include "bridge/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

#include "common/config_reader.hpp"
#include "common/table.hpp"

namespace bridge {

double CalibrationRow::after_busbw() const {
  return after_us > 0 ? static_cast<double>(bytes) / (after_us * 1e-6) * hardware::bus_factor(kind, ranks) / 1e9 : 0.0;
}

namespace {

struct Sample {
  const NcclTestsRun* run;
  const NcclTestsRow* row;
};

hardware::CollectiveOp op_of(const Sample& s) {
  return {.kind = s.run->kind, .bytes = s.row->bytes, .ranks = s.run->ranks, .nodes = s.run->nodes, .dtype = common::DType::fp32};
}

hardware::CollectiveCost price(const hardware::ClusterSpec& c, const Sample& s) {
  hardware::CollectiveOptions o;
  o.algo = s.run->forced_algo;
  return hardware::price_collective(c, op_of(s), o);
}

double busbw(const Sample& s, double us) { return static_cast<double>(s.row->bytes) / (us * 1e-6) * hardware::bus_factor(s.run->kind, s.run->ranks) / 1e9; }

/// Golden-section minimum of a unimodal f on [lo, hi].
template <class F>
double golden(F f, double lo, double hi, int iterations = 60) {
  const double g = (std::sqrt(5.0) - 1) / 2;
  double a = lo, b = hi, c = b - g * (b - a), d = a + g * (b - a);
  double fc = f(c), fd = f(d);
  for (int i = 0; i < iterations; ++i) {
    if (fc < fd) {
      b = d; d = c; fd = fc; c = b - g * (b - a); fc = f(c);
    } else {
      a = c; c = d; fc = fd; d = a + g * (b - a); fd = f(d);
    }
  }
  return (a + b) / 2;
}

}  // namespace

Calibration calibrate_nccl(const hardware::ClusterSpec& cluster, const std::vector<NcclTestsRun>& runs) {
  Calibration cal;
  cal.before = cluster.nccl;
  std::vector<Sample> samples;
  for (const auto& r : runs)
    for (const auto& row : r.rows)
      if (row.bytes > 0 && r.ranks > 1) samples.push_back({&r, &row});
  if (samples.empty()) throw common::ConfigError("--nccl-tests", "", "no rows with bytes > 0 over more than one GPU");

  // (1) the per-call overhead, from latency-bound rows
  hardware::ClusterSpec c = cluster;
  c.nccl.call_overhead_us = 0;
  std::vector<double> excess;
  std::vector<const NcclTestsRow*> overhead_rows;
  for (const auto& s : samples) {
    const auto cost = price(c, s);
    const double model_us = cost.latency.us() + cost.transfer.us();
    if (cost.transfer.us() < 0.10 * model_us) {
      excess.push_back(s.row->time_us - model_us);
      overhead_rows.push_back(s.row);
    }
  }
  if (excess.empty())
    throw common::ConfigError("--nccl-tests", "", "no latency-bound row (small messages) to fit nccl.call_overhead_us: run nccl-tests from -b 8 or -b 1K");
  std::sort(excess.begin(), excess.end());
  const double median = excess.size() % 2 ? excess[excess.size() / 2] : (excess[excess.size() / 2 - 1] + excess[excess.size() / 2]) / 2;
  c.nccl.call_overhead_us = std::max(0.0, median);
  cal.overhead_rows = static_cast<int>(excess.size());

  // (2) NVLS efficiency and latency: least squares in log bus bandwidth over the rows priced as NVLS
  std::vector<const Sample*> nvls;
  for (int round = 0; round < 5; ++round) {
    std::vector<const Sample*> now;
    for (const auto& s : samples)
      if (s.run->nodes == 1 && s.run->kind == hardware::CollectiveKind::all_reduce && price(c, s).algo == "nvls") now.push_back(&s);
    if (now == nvls && round > 0) break;
    nvls = now;
    if (nvls.empty()) break;
    auto sse = [&](double eff, double lat) {
      hardware::ClusterSpec k = c;
      k.nccl.nvls_efficiency = eff;
      k.nccl.nvls_latency_us = lat;
      double e = 0;
      for (const Sample* s : nvls) {
        hardware::CollectiveOptions o{.algo = hardware::CollectiveAlgo::nvls, .proto = hardware::CollectiveProto::simple};
        const auto cost = hardware::price_collective(k, op_of(*s), o);
        // log error, as validate/fit.cpp fits the cluster file (slicetune accuracy --fit): every size weighs alike
        const double d = std::log(busbw(*s, cost.latency.us() + cost.transfer.us()) / s->row->busbw_GBps);
        e += d * d;
      }
      return e;
    };
    auto best_eff = [&](double lat) { return golden([&](double eff) { return sse(eff, lat); }, 0.05, 1.0); };
    // bracket the latency on a coarse grid, then refine
    double best_lat = 0, best = 1e300;
    for (double lat = 0; lat <= 400; lat += 10) {
      const double v = sse(best_eff(lat), lat);
      if (v < best) { best = v; best_lat = lat; }
    }
    const double lat = golden([&](double l) { return sse(best_eff(l), l); }, std::max(0.0, best_lat - 10), best_lat + 10);
    c.nccl.nvls_latency_us = lat;
    c.nccl.nvls_efficiency = best_eff(lat);
  }
  cal.nvls_rows = static_cast<int>(nvls.size());
  cal.after = c.nccl;

  for (const auto& s : samples) {
    CalibrationRow row{.source = s.run->source, .line = s.row->line, .kind = s.run->kind, .ranks = s.run->ranks, .nodes = s.run->nodes,
                       .bytes = s.row->bytes, .measured_us = s.row->time_us, .measured_busbw = s.row->busbw_GBps};
    const auto before = price(cluster, s), after = price(c, s);
    row.before_us = before.latency.us() + before.transfer.us();
    row.after_us = after.latency.us() + after.transfer.us();
    row.algo = after.algo + "/" + after.proto;
    if (std::find(overhead_rows.begin(), overhead_rows.end(), s.row) != overhead_rows.end()) row.used_for = "call_overhead_us";
    if (std::find(nvls.begin(), nvls.end(), &s) != nvls.end()) row.used_for = "nvls";
    cal.rows.push_back(row);
  }
  return cal;
}

std::string calibrated_cluster_yaml(const std::string& yaml_text, const hardware::NcclSpec& f, const std::string& note) {
  std::istringstream in(yaml_text);
  std::string out;
  bool in_nccl = false;
  int replaced = 0;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') in_nccl = line.rfind("nccl:", 0) == 0;
    if (in_nccl) {
      auto put = [&](const char* key, double v) {
        const std::string k = std::string("  ") + key + ":";
        if (line.rfind(k, 0) != 0) return false;
        line = fmt::format("{} {:.4g}   # fitted by slicetune calibrate: {}", k, v, note);
        ++replaced;
        return true;
      };
      put("call_overhead_us", f.call_overhead_us) || put("nvls_efficiency", f.nvls_efficiency) || put("nvls_latency_us", f.nvls_latency_us);
    }
    out += line + "\n";
  }
  if (replaced != 3) throw common::ConfigError("--cluster", "nccl", "the cluster file has no nccl section with the three constants to replace");
  return out;
}

std::string calibration_table(const Calibration& cal) {
  common::Table t({"file:line", "collective", "GPUs", "bytes", "measured busbw", "model before", "model after", "error after", "algo", "fits"},
                  {"", "", "", "B", "GB/s", "GB/s", "GB/s", "%", "", ""});
  for (const auto& r : cal.rows) {
    const double before_bw = static_cast<double>(r.bytes) / (r.before_us * 1e-6) * hardware::bus_factor(r.kind, r.ranks) / 1e9;
    const std::string file = r.source.substr(r.source.rfind('/') == std::string::npos ? 0 : r.source.rfind('/') + 1);
    t.row({fmt::format("{}:{}", file, r.line), std::string(hardware::to_string(r.kind)),
           fmt::format("{}{}", r.ranks, r.nodes > 1 ? fmt::format(" ({} nodes)", r.nodes) : ""), std::to_string(r.bytes),
           fmt::format("{:.2f}", r.measured_busbw), fmt::format("{:.2f}", before_bw), fmt::format("{:.2f}", r.after_busbw()),
           r.measured_busbw > 0 ? fmt::format("{:+.1f}", 100 * (r.after_busbw() - r.measured_busbw) / r.measured_busbw) : "-", r.algo,
           r.used_for.empty() ? "-" : r.used_for});
  }
  return t.str();
}

}  // namespace bridge
