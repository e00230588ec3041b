// slicetune calibrate: fit a cluster file's collective constants to measured nccl-tests output.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "bridge/calibrate.hpp"
#include "cli/command.hpp"
#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"

namespace {

struct CalibrateFlags {
  std::string cluster = "dgx-h100", out;
  std::vector<std::string> nccl_tests;
  bool json = false;
};

void run_calibrate(const CalibrateFlags& f) {
  if (f.nccl_tests.empty()) cli::bad_flag("--nccl-tests", "give one or more nccl-tests output files");
  const auto cfg = common::resolve_config("clusters", f.cluster, /*as_written=*/true);  // rewritten below, comments kept
  const hardware::ClusterSpec cluster = hardware::parse_cluster(cfg.text, cfg.source);
  std::vector<bridge::NcclTestsRun> runs;
  for (const auto& path : f.nccl_tests) runs.push_back(bridge::parse_nccl_tests(common::read_text_file(path), path));
  const bridge::Calibration cal = bridge::calibrate_nccl(cluster, runs);
  std::string files;
  for (const auto& p : f.nccl_tests) files += (files.empty() ? "" : ", ") + p.substr(p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1);
  if (!f.out.empty())
    common::write_file_atomically(f.out, bridge::calibrated_cluster_yaml(cfg.text, cal.after, fmt::format("nccl-tests {}", files)));
  auto pct = [](double a, double b) { return b != 0 ? 100.0 * (a - b) / b : 0.0; };
  if (f.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : cal.rows)
      rows.push_back({{"file", r.source}, {"line", r.line}, {"collective", hardware::to_string(r.kind)}, {"gpus", r.ranks}, {"nodes", r.nodes},
                      {"bytes", r.bytes}, {"measured_us", r.measured_us}, {"measured_busbw_GBps", r.measured_busbw},
                      {"model_before_us", r.before_us}, {"model_after_us", r.after_us}, {"model_after_busbw_GBps", r.after_busbw()},
                      {"algo", r.algo}, {"fits", r.used_for}});
    auto spec = [](const hardware::NcclSpec& n) {
      return nlohmann::json{{"call_overhead_us", n.call_overhead_us}, {"nvls_efficiency", n.nvls_efficiency}, {"nvls_latency_us", n.nvls_latency_us}};
    };
    std::cout << nlohmann::json{{"schema_version", cli::kJsonSchemaVersion}, {"cluster", cluster.name}, {"before", spec(cal.before)},
                                {"after", spec(cal.after)}, {"overhead_rows", cal.overhead_rows}, {"nvls_rows", cal.nvls_rows}, {"rows", rows}}
                     .dump(2)
              << "\n";
    return;
  }
  fmt::print("slicetune calibrate: {} ({}) from {} nccl-tests file(s), {} rows\n\n", cluster.name, cfg.source, runs.size(), cal.rows.size());
  fmt::print("constant               before     after  change  fitted on\n");
  fmt::print("nccl.call_overhead_us  {:>6.3g}  {:>8.4g}  {:>+5.1f} %  {} latency-bound row(s): median of measured - modelled time\n",
             cal.before.call_overhead_us, cal.after.call_overhead_us, pct(cal.after.call_overhead_us, cal.before.call_overhead_us), cal.overhead_rows);
  fmt::print("nccl.nvls_efficiency   {:>6.3g}  {:>8.4g}  {:>+5.1f} %  {} one-node NVLS all-reduce row(s): least squares in log busbw\n",
             cal.before.nvls_efficiency, cal.after.nvls_efficiency, pct(cal.after.nvls_efficiency, cal.before.nvls_efficiency), cal.nvls_rows);
  fmt::print("nccl.nvls_latency_us   {:>6.3g}  {:>8.4g}  {:>+5.1f} %  same rows\n\n", cal.before.nvls_latency_us, cal.after.nvls_latency_us,
             pct(cal.after.nvls_latency_us, cal.before.nvls_latency_us));
  fmt::print("{}", bridge::calibration_table(cal));
  if (!f.out.empty()) fmt::print("\nwrote {} (use it as --cluster {})\n", f.out, f.out);
}

const bool registered = cli::register_command(55, "calibrate", "fit a cluster file's NCCL constants to nccl-tests output and write a new cluster file", [](CLI::App* cmd) {
  auto f = std::make_shared<CalibrateFlags>();
  cmd->add_option("--cluster", f->cluster, "the cluster file to start from (name or YAML)")->capture_default_str();
  cmd->add_option("--nccl-tests", f->nccl_tests, "nccl-tests output files (all_reduce_perf, all_gather_perf, ... text)")->expected(1, -1);
  cmd->add_option("--out", f->out, "write the cluster file with the fitted constants");
  cmd->add_flag("--json", f->json, "print one JSON object");
  cmd->callback([f] { run_calibrate(*f); });
});

}  // namespace
