#include "cli/search_flags.hpp"

#include <algorithm>
#include <string_view>

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
  cmd->add_option("--tp-layouts", f.tp_layouts,
                  "tensor-parallel layouts to search, comma-separated: 1d | 2d | 2.5d (SUMMA grids, "
                  "docs/tensor-parallel-2d.md); default all three, e.g. 1d for 1D only");
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
  if (f.cmd->count("--tp-layouts")) {
    s.space.tp_layouts.clear();
    std::string_view rest = f.tp_layouts;
    while (true) {
      const auto comma = rest.find(',');
      sim::TpLayout l;
      if (!sim::parse_tp_layout(rest.substr(0, comma), l))
        bad_flag("--tp-layouts", "expected layouts 1d | 2d | 2.5d separated by commas (e.g. 1d,2d,2.5d), got '" + f.tp_layouts + "'");
      if (std::find(s.space.tp_layouts.begin(), s.space.tp_layouts.end(), l) == s.space.tp_layouts.end()) s.space.tp_layouts.push_back(l);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  return s;
}

}  // namespace cli
