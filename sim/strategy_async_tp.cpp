// Strategy async-tp: PyTorch's asynchronous tensor parallelism (torchtitan
// --parallelism.enable_async_tensor_parallel; torch._inductor's micro-pipeline TP pass,
// torch/_inductor/fx_passes/micro_pipeline_tp.py, over torch.distributed._symmetric_memory).
// The pass finds the sequence-parallel patterns all_gather_into_tensor -> matmul and
// matmul -> reduce_scatter_tensor and replaces them with fused ops that run tp steps:
//  - AllGather + GEMM (QKV and FC1 forward, out-proj and FC2 input gradients): the GEMM on the
//    local shard, while copy engines bring the other tp - 1 shards one per step, each followed by
//    the GEMM on it;
//  - GEMM + ReduceScatter (out-proj and FC2 forward): the rows of each peer's shard, pushed to it
//    by copy engines as soon as they are computed (the local rows last), then a local sum of the
//    tp partials (an element-wise kernel).
// Copy engines take no SMs from the GEMMs (the interference model's copy-engine transfers, at
// interference.copy_engine_bandwidth of NCCL's bandwidth). The other collectives keep Megatron-LM's
// schedule (strategy none), so the difference to none is the decomposition alone.
//
// What it needs (Strategy::check): sequence parallelism (without it the TP collectives are
// AllReduces, which the pass does not decompose), tp > 1, and the TP group inside one node
// (symmetric memory maps the peers' buffers over NVLink with CUDA IPC handles).
#include <fmt/format.h>

#include "sim/builder.hpp"
#include "sim/strategy.hpp"

namespace sim {

namespace {

std::optional<std::string> check(const ModelSpec&, const hardware::ClusterSpec& c, const Plan& p) {
  if (p.tp == 1) return std::string("tp=1 has no tensor-parallel collectives to decompose");
  if (!p.sequence_parallel)
    return std::string(
        "async TP decomposes the sequence-parallel AllGather -> GEMM and GEMM -> ReduceScatter (torch micro_pipeline_tp); "
        "without "
        "sequence parallelism there are only AllReduces; add --sequence-parallel");
  // The CPU backend runs the same steps with MPI point-to-point (executor/tp_pieces.hpp): no
  // symmetric memory to map within a node there
  if (c.gpu.arch != hardware::GpuArch::cpu && p.tp > c.node.gpus_per_node)
    return fmt::format(
        "tp={} spans {} nodes of {} GPUs: symmetric memory maps the tensor-parallel peers' buffers over NVLink (CUDA IPC), "
        "inside one node",
        p.tp, (p.tp + c.node.gpus_per_node - 1) / c.node.gpus_per_node, c.node.gpus_per_node);
  return std::nullopt;
}

}  // namespace

const Strategy& strategy_async_tp() {
  static const Strategy s{
      .name = "async-tp",
      .description =
          "PyTorch async tensor parallelism: AllGather + GEMM and GEMM + ReduceScatter as tp steps moved by copy engines",
      .knobs = {},
      .baseline = false,
      .searched = true,
      .issues_builder_pieces = true,
      .describe = [](const Plan&) { return std::string("async-tp"); },
      .check = check,
      .schedule =
          [](Builder& b) { strategy_none().schedule(b); },  // Megatron-LM's order; the builder decomposes the sites (tp_overlap)
      .tp_overlap = [](const Plan&) { return TpOverlap{.ag_peer_steps = true, .rs_peer_steps = true}; },
  };
  return s;
}

}  // namespace sim
