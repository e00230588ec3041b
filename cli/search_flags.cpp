#include "cli/search_flags.hpp"

#include "common/limits.hpp"

namespace cli {

void add_search_flags(CLI::App* cmd, SearchFlags& f) {
  f.cmd = cmd;
  add_target_flags(cmd, f.target, false);
  cmd->add_option("--global-batch", f.global_batch, "sequences per step (default 8 x GPUs)");
  cmd->add_option("--seq-len", f.seq_len, "sequence length (default the model's)");
  cmd->add_option("--dtype", f.dtype, "bf16 (default) | fp16 | fp8 | fp32");
  cmd->add_option("--stack", f.stack,
                  "software stack issuing the kernels: eager (default; Megatron-LM) | cpp | cuda_graphs (DeepSpeed-Domino) | megatron-core");
  cmd->add_option("--threads", f.threads, "evaluation threads (default: all cores)");
}

SearchSetup search_setup(const SearchFlags& f) {
  const sim::TargetInput in = f.target.input();
  SearchSetup s{.model = sim::load_model(in.model),
                .cluster = in.cluster_spec ? *in.cluster_spec : hardware::load_cluster(in.cluster),
                .space = {}};
  if (in.nodes) hardware::set_nodes(s.cluster, *in.nodes, "--nodes");
  namespace lim = common::limits;
  if (f.cmd->count("--global-batch"))
    s.space.global_batch = static_cast<int>(int_flag("--global-batch", f.global_batch, 1, lim::kMaxGlobalBatch));
  if (f.cmd->count("--seq-len")) s.space.seq_len = int_flag("--seq-len", f.seq_len, 1, lim::kMaxSeqLen);
  if (f.cmd->count("--dtype") && !common::parse_dtype(f.dtype, s.space.dtype))
    bad_flag("--dtype", "expected bf16 | fp16 | fp8 | fp32, got '" + f.dtype + "'");
  if (f.cmd->count("--stack") && !hardware::parse_stack(f.stack, s.space.stack))
    bad_flag("--stack", "expected eager | cpp | cuda_graphs | megatron-core, got '" + f.stack + "'");
  int_flag("--threads", f.threads, 0, lim::kMaxThreads);  // 0: all cores
  return s;
}

}  // namespace cli
