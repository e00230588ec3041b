// slicetune list: the embedded models and clusters.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "hardware/cluster.hpp"
#include "common/embedded_configs.hpp"
#include "sim/model.hpp"
#include "common/table.hpp"

namespace {

void run_list(bool json) {
  nlohmann::json out = {{"schema_version", cli::kJsonSchemaVersion}, {"models", nlohmann::json::array()}, {"clusters", nlohmann::json::array()}};
  common::Table models({"model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "params", "norm", "activation"},
                    {"", "", "", "", "", "", "", "", "", ""});
  std::vector<sim::ModelSpec> specs;
  for (const auto& name : common::embedded_names("models")) specs.push_back(sim::load_model(name));
  std::stable_sort(specs.begin(), specs.end(), [](const auto& a, const auto& b) { return a.params(a.seq_len) < b.params(b.seq_len); });
  for (const auto& m : specs) {
    const double params = static_cast<double>(m.params(m.seq_len));
    models.row({m.name, fmt::format("{}", m.layers), fmt::format("{}", m.hidden), fmt::format("{}", m.heads),
                fmt::format("{}", m.kv_heads), fmt::format("{}", m.ffn_hidden), fmt::format("{}", m.vocab),
                params >= 1e9 ? fmt::format("{:.2f}B", params / 1e9) : fmt::format("{:.2f}M", params / 1e6), m.norm == sim::Norm::layernorm ? "layernorm" : "rmsnorm",
                m.activation == sim::Activation::gelu ? "gelu" : "swiglu"});
    out["models"].push_back({{"name", m.name}, {"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads},
                             {"kv_heads", m.kv_heads}, {"ffn_hidden", m.ffn_hidden}, {"vocab", m.vocab}, {"params", params}});
  }
  common::Table clusters({"cluster", "GPU", "GPUs/node", "bf16 peak", "HBM", "HBM bw", "NVLink", "NVLS", "NICs", "NIC bw"},
                      {"", "", "", "TFLOP/s", "GB", "GB/s", "GB/s/dir", "", "per node", "Gb/s"});
  for (const auto& name : common::embedded_names("clusters")) {
    auto c = hardware::load_cluster(name);
    clusters.row({c.name, c.gpu.name, fmt::format("{}", c.node.gpus_per_node), fmt::format("{:.0f}", c.gpu.peak_flops(common::DType::bf16) / 1e12),
                  fmt::format("{:.0f}", c.gpu.hbm_capacity_bytes / 1e9), fmt::format("{:.0f}", c.gpu.hbm_bytes_per_s / 1e9),
                  fmt::format("{:.0f}", c.node.nvlink_bytes_per_s / 1e9), c.node.nvls ? "yes" : "no",
                  fmt::format("{}", c.network.nics_per_node), fmt::format("{:.0f}", c.network.nic_bytes_per_s * 8 / 1e9)});
    out["clusters"].push_back({{"name", c.name}, {"gpu", c.gpu.name}, {"gpus_per_node", c.node.gpus_per_node}});
  }
  if (json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("models (configs/models, embedded)\n{}\nclusters (configs/clusters, embedded; --nodes sets the count)\n{}",
             models.str(), clusters.str());
}

const bool registered = cli::register_command(90, "list", "list the embedded models and clusters", [](CLI::App* cmd) {
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "JSON output");
  cmd->callback([json] { run_list(*json); });
});

}  // namespace
