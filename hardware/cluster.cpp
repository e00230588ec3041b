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
    case Stack::megatron_core: return "megatron-core";
  }
  return "?";
}

bool parse_stack(std::string_view s, Stack& out) {
  for (Stack st : kAllStacks)
    if (to_string(st) == s) {
      out = st;
      return true;
    }
  return false;
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
  if (r.has("fused_rs_pull_gb_per_s")) {
    // only FLUX's sm90 kernel pulls its tiles in the kernel; its sm80 kernel pushes them from the
    // epilogue at NVLink speed (hardware/tp_overlap.hpp), so the key means nothing elsewhere
    if (g.arch != GpuArch::hopper)
      r.fail("fused_rs_pull_gb_per_s", fmt::format("only arch hopper reads it (FLUX's sm90 in-kernel pull), not {}", to_string(g.arch)));
    g.fused_rs_pull_bytes_per_s = r.positive("fused_rs_pull_gb_per_s", lim::kMaxGbPerS) * 1e9;
  }
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
  if (r.has("nic_efficiency")) n.nic_efficiency = r.fraction("nic_efficiency");
  n.latency = common::Duration::from_us(r.positive("latency_us", lim::kMaxMicroseconds));
  auto topo = r.choice("topology", {"rail_optimized", "fat_tree"});
  n.topology = topo == "rail_optimized" ? Topology::rail_optimized : Topology::fat_tree;
  n.oversubscription = r.number("oversubscription");
  if (!(n.oversubscription >= 1 && n.oversubscription <= lim::kMaxRatio))
    r.fail("oversubscription", fmt::format("expected a ratio in [1, {}] (1 = non-blocking)", lim::kMaxRatio));
  r.finish();
  return n;
}

// Element-wise kinds as a stack's `fused` list names them.
bool parse_elementwise_kind(std::string_view name, ElementwiseKind& out) {
  for (int k = 0; k <= static_cast<int>(ElementwiseKind::accumulate); ++k)
    if (to_string(static_cast<ElementwiseKind>(k)) == name) {
      out = static_cast<ElementwiseKind>(k);
      return true;
    }
  return false;
}

StackSpec read_stack(common::ConfigReader r) {
  StackSpec st;
  st.launch = read_us(r, "launch_us");
  st.op_overhead = read_us(r, "op_overhead_us");
  st.gemm_efficiency = r.fraction("gemm_efficiency");
  const auto att = r.choice("attention", {"flash", "unfused", "unfused_compiled"});
  st.attention = att == "flash" ? AttentionKernel::flash : att == "unfused" ? AttentionKernel::unfused : AttentionKernel::unfused_compiled;
  for (const auto& name : r.strings_or_empty("fused")) {
    ElementwiseKind k;
    if (!parse_elementwise_kind(name, k))
      r.fail("fused", fmt::format("'{}' is not an element-wise op (layernorm, rmsnorm, rope, gelu, swiglu, residual, cross_entropy, concat, accumulate, embedding)", name));
    st.fused |= 1u << static_cast<int>(k);
  }
  r.finish();
  return st;
}

HostSpec read_host(common::ConfigReader r) {
  HostSpec h;
  if (r.has("stacks")) {
    auto stacks = r.child("stacks");
    for (Stack s : kAllStacks) h.stacks[static_cast<int>(s)] = read_stack(stacks.child(std::string(to_string(s))));
    stacks.finish();
    r.finish();
    return h;
  }
  // The form before stacks were described by mechanisms (profiles written by slicetune profile
  // version 1): per-stack launch and op overhead, one attention kernel, kernel_efficiency 1.
  auto launch = r.child("launch_us");
  auto over = r.child("op_overhead_us");
  for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) {
    const std::string k(to_string(s));
    h.stacks[static_cast<int>(s)].launch = read_us(launch, k);
    h.stacks[static_cast<int>(s)].op_overhead = read_us(over, k);
  }
  launch.finish();
  over.finish();
  if (r.has("kernel_efficiency")) {
    auto eff = r.child("kernel_efficiency");
    for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) {
      const std::string k(to_string(s));
      if (eff.number(k) != 1.0)
        eff.fail(k, "kernel_efficiency is retired: describe the stack under host.stacks (launch_us, op_overhead_us, gemm_efficiency, attention, fused; docs/cost-models.md)");
    }
    eff.finish();
  }
  const auto attention = r.choice("attention", {"flash", "unfused"}) == "flash" ? AttentionKernel::flash : AttentionKernel::unfused;
  for (auto& st : h.stacks) st.attention = attention;
  h.stacks[static_cast<int>(Stack::megatron_core)] = h.stacks[static_cast<int>(Stack::cpp)];
  r.finish();
  return h;
}

InterferenceSpec read_interference(common::ConfigReader r) {
  InterferenceSpec i;
  i.sm_contention = r.boolean("sm_contention");
  i.hbm_amplification = r.number("hbm_amplification");
  if (!(i.hbm_amplification >= 0 && i.hbm_amplification <= 10))
    r.fail("hbm_amplification", fmt::format("expected HBM bytes per wire byte in [0, 10], got {}", i.hbm_amplification));
  i.sm_comm_slowdown = r.number_or("sm_comm_slowdown", 0.0);
  if (!(i.sm_comm_slowdown >= 0 && i.sm_comm_slowdown < 1)) r.fail("sm_comm_slowdown", "expected a fraction in [0, 1)");
  if (r.has("copy_engine_bandwidth")) i.copy_engine_bandwidth = r.fraction("copy_engine_bandwidth");
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

MemorySpec read_memory(common::ConfigReader r) {
  MemorySpec m;
  m.fragmentation_reserve = r.number_or("fragmentation_reserve", m.fragmentation_reserve);
  if (!(m.fragmentation_reserve >= 0 && m.fragmentation_reserve < 1))
    r.fail("fragmentation_reserve", "expected a fraction of HBM in [0, 1)");
  const double gb = r.number_or("cuda_context_gb", m.cuda_context_bytes / 1e9);
  if (!(gb >= 0 && gb <= lim::kMaxHbmGb)) r.fail("cuda_context_gb", fmt::format("expected GB in [0, {}], got {}", lim::kMaxHbmGb, gb));
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
