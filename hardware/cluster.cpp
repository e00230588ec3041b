#include "hardware/cluster.hpp"

#include <fmt/format.h>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "common/limits.hpp"

namespace hardware {

std::string_view to_string(GpuArch a) {
  switch (a) {
    case GpuArch::ampere: return "ampere";
    case GpuArch::hopper: return "hopper";
    case GpuArch::blackwell: return "blackwell";
    case GpuArch::cpu: return "cpu";
  }
  return "?";
}

std::string_view to_string(Stack s) {
  switch (s) {
    case Stack::eager: return "eager";
    case Stack::cpp: return "cpp";
    case Stack::cuda_graphs: return "cuda_graphs";
  }
  return "?";
}

bool parse_stack(std::string_view s, Stack& out) {
  if (s == "eager") out = Stack::eager;
  else if (s == "cpp") out = Stack::cpp;
  else if (s == "cuda_graphs") out = Stack::cuda_graphs;
  else return false;
  return true;
}

namespace {

namespace lim = common::limits;

/// Microseconds >= 0 (fixed costs), up to limits::kMaxMicroseconds.
common::Duration read_us(common::ConfigReader& r, const std::string& key) {
  return common::Duration::from_us(r.number_in(key, 0, lim::kMaxMicroseconds));
}

GpuSpec read_gpu(common::ConfigReader r) {
  GpuSpec g;
  g.name = r.str("name");
  auto arch = r.choice("arch", {"ampere", "hopper", "blackwell", "cpu"});
  g.arch = arch == "ampere" ? GpuArch::ampere
           : arch == "hopper" ? GpuArch::hopper
           : arch == "blackwell" ? GpuArch::blackwell
                                 : GpuArch::cpu;
  auto peak = r.child("peak_tflops");
  for (common::DType t : {common::DType::fp32, common::DType::bf16, common::DType::fp16, common::DType::fp8}) {
    // A GPU without a dtype (A100 has no fp8) says 0; plans in that dtype are then refused.
    const double v = peak.number_in(std::string(to_string(t)), 0, lim::kMaxTflops);
    g.peak_flops_per_s[static_cast<int>(t)] = v * 1e12;
  }
  peak.finish();
  g.hbm_bytes_per_s = r.positive("hbm_gb_per_s", lim::kMaxGbPerS) * 1e9;
  g.hbm_capacity_bytes = r.positive("hbm_gb", lim::kMaxHbmGb) * 1e9;
  g.sm_count = r.int_in("sms", 1, lim::kMaxSms);
  // one fraction for every dtype, or a mapping {fp32, bf16, fp16, fp8}
  if (r.is_mapping("gemm_efficiency")) {
    auto eff = r.child("gemm_efficiency");
    for (common::DType t : {common::DType::fp32, common::DType::bf16, common::DType::fp16, common::DType::fp8}) {
      const std::string k(to_string(t));
      g.gemm_efficiency[static_cast<int>(t)] = eff.fraction(k);
    }
    eff.finish();
  } else {
    const double v = r.number("gemm_efficiency");
    if (!(v > 0 && v <= 1)) r.fail("gemm_efficiency", "expected a fraction in (0, 1] or a mapping {fp32, bf16, fp16, fp8}");
    g.gemm_efficiency.fill(v);
  }
  g.gemm_tile_overhead = read_us(r, "gemm_tile_overhead_us");
  g.memory_efficiency = r.fraction("memory_efficiency");
  g.kernel_latency = read_us(r, "kernel_latency_us");
  r.finish();
  return g;
}

NodeFabric read_node(common::ConfigReader r) {
  NodeFabric n;
  n.gpus_per_node = r.int_in("gpus", 1, lim::kMaxGpusPerNode);
  n.nvlink_bytes_per_s = r.positive("nvlink_gb_per_s", lim::kMaxGbPerS) * 1e9;
  n.nvlink_links = r.int_in("nvlink_links", 1, lim::kMaxNvlinkLinks);
  n.nvswitch = r.boolean("nvswitch");
  n.nvls = r.boolean("nvls");
  r.finish();
  return n;
}

NetworkSpec read_network(common::ConfigReader r) {
  NetworkSpec n;
  n.nics_per_node = r.int_in("nics_per_node", 1, lim::kMaxNicsPerNode);
  n.nic_bytes_per_s = r.positive("nic_gbit_per_s", lim::kMaxGbPerS) * 1e9 / 8.0;
  n.latency = common::Duration::from_us(r.positive("latency_us", lim::kMaxMicroseconds));
  auto topo = r.choice("topology", {"rail_optimized", "fat_tree"});
  n.topology = topo == "rail_optimized" ? Topology::rail_optimized : Topology::fat_tree;
  n.oversubscription = r.number("oversubscription");
  if (!(n.oversubscription >= 1 && n.oversubscription <= lim::kMaxRatio))
    r.fail("oversubscription", fmt::format("expected a ratio in [1, {}] (1 = non-blocking)", lim::kMaxRatio));
  r.finish();
  return n;
}

HostSpec read_host(common::ConfigReader r) {
  HostSpec h;
  auto launch = r.child("launch_us");
  for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) {
    h.launch[static_cast<int>(s)] = read_us(launch, std::string(to_string(s)));
  }
  launch.finish();
  auto over = r.child("op_overhead_us");
  for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) {
    h.op_overhead[static_cast<int>(s)] = read_us(over, std::string(to_string(s)));
  }
  over.finish();
  auto eff = r.child("kernel_efficiency");
  for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) {
    h.kernel_efficiency[static_cast<int>(s)] = eff.fraction(std::string(to_string(s)));
  }
  eff.finish();
  h.attention = r.choice("attention", {"flash", "unfused"}) == "flash" ? AttentionKernel::flash : AttentionKernel::unfused;
  r.finish();
  return h;
}

InterferenceSpec read_interference(common::ConfigReader r) {
  InterferenceSpec i;
  i.sm_contention = r.boolean("sm_contention");
  i.hbm_amplification = r.number_in("hbm_amplification", 0, lim::kMaxRatio);
  i.comm_slowdown = r.number("comm_slowdown");
  if (!(i.comm_slowdown >= 0 && i.comm_slowdown < 1)) r.fail("comm_slowdown", "expected a fraction in [0, 1)");
  r.finish();
  return i;
}

NcclSpec read_nccl(common::ConfigReader r) {
  NcclSpec n;
  n.call_overhead_us = r.number_in("call_overhead_us", 0, lim::kMaxMicroseconds);
  n.nvls_efficiency = r.fraction("nvls_efficiency");
  n.nvls_latency_us = r.positive("nvls_latency_us", lim::kMaxMicroseconds);
  r.finish();
  return n;
}

}  // namespace

ClusterSpec parse_cluster(const std::string& yaml_text, const std::string& source) {
  common::ConfigReader r(common::parse_yaml(yaml_text, source), source);
  ClusterSpec c;
  c.source = source;
  c.name = r.str("name");
  c.gpu = read_gpu(r.child("gpu"));
  c.node = read_node(r.child("node"));
  c.network = read_network(r.child("network"));
  c.host = read_host(r.child("host"));
  c.interference = read_interference(r.child("interference"));
  c.nccl = read_nccl(r.child("nccl"));
  c.nodes = r.has("nodes") ? r.int_in("nodes", 1, lim::kMaxNodes) : 1;
  if (static_cast<std::int64_t>(c.nodes) * c.node.gpus_per_node > lim::kMaxGpus)
    r.fail("nodes", fmt::format("{} nodes x {} GPUs is more than the {} GPUs slicetune simulates", c.nodes, c.node.gpus_per_node, lim::kMaxGpus));
  r.finish();
  return c;
}

void set_nodes(ClusterSpec& c, std::int64_t nodes, const std::string& source) {
  if (nodes < 1 || nodes > lim::kMaxNodes)
    throw common::ConfigError(source, "", fmt::format("expected a number of nodes in [1, {}], got {}", lim::kMaxNodes, nodes));
  if (nodes * c.node.gpus_per_node > lim::kMaxGpus)
    throw common::ConfigError(source, "", fmt::format("{} nodes x {} GPUs of {} is more than the {} GPUs slicetune simulates", nodes,
                                                      c.node.gpus_per_node, c.name, lim::kMaxGpus));
  c.nodes = static_cast<int>(nodes);
}

ClusterSpec load_cluster(const std::string& name_or_path) {
  auto cfg = common::resolve_config("clusters", name_or_path);
  return parse_cluster(cfg.text, cfg.source);
}

}  // namespace hardware
