#include "hardware/cluster.hpp"

#include <fmt/format.h>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"

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
    double v = peak.number(std::string(to_string(t)));
    if (v < 0) peak.fail(std::string(to_string(t)), "expected a number >= 0 (TFLOP/s, dense)");
    g.peak_flops_per_s[static_cast<int>(t)] = v * 1e12;
  }
  peak.finish();
  g.hbm_bytes_per_s = r.positive("hbm_gb_per_s") * 1e9;
  g.hbm_capacity_bytes = r.positive("hbm_gb") * 1e9;
  g.sm_count = static_cast<int>(r.positive_integer("sms"));
  // one fraction for every dtype, or a mapping {fp32, bf16, fp16, fp8}
  if (r.is_mapping("gemm_efficiency")) {
    auto eff = r.child("gemm_efficiency");
    for (common::DType t : {common::DType::fp32, common::DType::bf16, common::DType::fp16, common::DType::fp8}) {
      const std::string k(to_string(t));
      double v = eff.number(k);
      if (v <= 0 || v > 1) eff.fail(k, "expected a fraction in (0, 1]");
      g.gemm_efficiency[static_cast<int>(t)] = v;
    }
    eff.finish();
  } else {
    const double v = r.number("gemm_efficiency");
    if (v <= 0 || v > 1) r.fail("gemm_efficiency", "expected a fraction in (0, 1] or a mapping {fp32, bf16, fp16, fp8}");
    g.gemm_efficiency.fill(v);
  }
  const double tile_us = r.number("gemm_tile_overhead_us");
  if (tile_us < 0) r.fail("gemm_tile_overhead_us", "expected microseconds >= 0");
  g.gemm_tile_overhead = common::Duration::from_us(tile_us);
  g.memory_efficiency = r.positive("memory_efficiency");
  if (g.memory_efficiency > 1) r.fail("memory_efficiency", "expected a fraction in (0, 1]");
  g.kernel_latency = common::Duration::from_us(r.number("kernel_latency_us"));
  r.finish();
  return g;
}

NodeFabric read_node(common::ConfigReader r) {
  NodeFabric n;
  n.gpus_per_node = static_cast<int>(r.positive_integer("gpus"));
  n.nvlink_bytes_per_s = r.positive("nvlink_gb_per_s") * 1e9;
  n.nvlink_links = static_cast<int>(r.positive_integer("nvlink_links"));
  n.nvswitch = r.boolean("nvswitch");
  n.nvls = r.boolean("nvls");
  r.finish();
  return n;
}

NetworkSpec read_network(common::ConfigReader r) {
  NetworkSpec n;
  n.nics_per_node = static_cast<int>(r.positive_integer("nics_per_node"));
  n.nic_bytes_per_s = r.positive("nic_gbit_per_s") * 1e9 / 8.0;
  n.latency = common::Duration::from_us(r.positive("latency_us"));
  auto topo = r.choice("topology", {"rail_optimized", "fat_tree"});
  n.topology = topo == "rail_optimized" ? Topology::rail_optimized : Topology::fat_tree;
  n.oversubscription = r.positive("oversubscription");
  if (n.oversubscription < 1) r.fail("oversubscription", "expected a ratio >= 1 (1 = non-blocking)");
  r.finish();
  return n;
}

HostSpec read_host(common::ConfigReader r) {
  HostSpec h;
  auto launch = r.child("launch_us");
  for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) {
    double v = launch.number(std::string(to_string(s)));
    if (v < 0) launch.fail(std::string(to_string(s)), "expected microseconds >= 0");
    h.launch[static_cast<int>(s)] = common::Duration::from_us(v);
  }
  launch.finish();
  auto over = r.child("op_overhead_us");
  for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) {
    double v = over.number(std::string(to_string(s)));
    if (v < 0) over.fail(std::string(to_string(s)), "expected microseconds >= 0");
    h.op_overhead[static_cast<int>(s)] = common::Duration::from_us(v);
  }
  over.finish();
  auto eff = r.child("kernel_efficiency");
  for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) {
    double v = eff.number(std::string(to_string(s)));
    if (!(v > 0 && v <= 1)) eff.fail(std::string(to_string(s)), "expected a fraction in (0, 1]");
    h.kernel_efficiency[static_cast<int>(s)] = v;
  }
  eff.finish();
  h.attention = r.choice("attention", {"flash", "unfused"}) == "flash" ? AttentionKernel::flash : AttentionKernel::unfused;
  r.finish();
  return h;
}

InterferenceSpec read_interference(common::ConfigReader r) {
  InterferenceSpec i;
  i.sm_contention = r.boolean("sm_contention");
  i.hbm_amplification = r.number("hbm_amplification");
  if (i.hbm_amplification < 0) r.fail("hbm_amplification", "expected a number >= 0");
  i.comm_slowdown = r.number("comm_slowdown");
  if (i.comm_slowdown < 0 || i.comm_slowdown >= 1) r.fail("comm_slowdown", "expected a fraction in [0, 1)");
  r.finish();
  return i;
}

NcclSpec read_nccl(common::ConfigReader r) {
  NcclSpec n;
  n.call_overhead_us = r.number("call_overhead_us");
  if (n.call_overhead_us < 0) r.fail("call_overhead_us", "expected microseconds >= 0");
  n.nvls_efficiency = r.positive("nvls_efficiency");
  if (n.nvls_efficiency > 1) r.fail("nvls_efficiency", "expected a fraction in (0, 1]");
  n.nvls_latency_us = r.positive("nvls_latency_us");
  r.finish();
  return n;
}

MemorySpec read_memory(common::ConfigReader r) {
  MemorySpec m;
  m.fragmentation_reserve = r.number_or("fragmentation_reserve", m.fragmentation_reserve);
  if (!(m.fragmentation_reserve >= 0 && m.fragmentation_reserve < 1))
    r.fail("fragmentation_reserve", "expected a fraction of HBM in [0, 1)");
  const double gb = r.number_or("cuda_context_gb", m.cuda_context_bytes / 1e9);
  if (!(gb >= 0 && gb < 1e6)) r.fail("cuda_context_gb", "expected GB >= 0");
  m.cuda_context_bytes = gb * 1e9;
  r.finish();
  return m;
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
  if (r.has("memory")) c.memory = read_memory(r.child("memory"));
  c.nodes = static_cast<int>(r.integer_or("nodes", 1));
  if (c.nodes <= 0) r.fail("nodes", "expected a positive integer");
  r.finish();
  return c;
}

ClusterSpec load_cluster(const std::string& name_or_path) {
  auto cfg = common::resolve_config("clusters", name_or_path);
  return parse_cluster(cfg.text, cfg.source);
}

}  // namespace hardware
