// slicetune profile: measure this machine's costs into a profile file (run under mpirun for collectives).
#include <fmt/format.h>

#include <cstdio>
#include <set>

#include "cli/command.hpp"
#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "common/limits.hpp"
#include "hardware/profile.hpp"
#include "executor/mpi_plugin.hpp"
#include "profiler/profiler.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"

namespace {

struct ProfileFlags {
  std::string backend = "cpu";
  std::string out;
  std::string model;
  std::vector<long long> tp;  // read 64 bits wide and range-checked in run_profile
  long long micro_batch = 0;  ///< 0: the smallest micro-batch each slicing allows
  long long seq_len = 0;      ///< 0: the model's
  bool quick = false;
};

/// The exact GEMM, attention, element-wise and optimizer shapes of `model` for each tp, under no
/// slicing and domino with 2 and 4 row slices and 1 and 2 column chunks, at `micro_batch` (0: the
/// smallest each slicing allows) and `seq_len` (0: the model's). The sizes are checked in run_profile.
void add_model_shapes(const std::string& model, const std::vector<long long>& tps, int micro_batch, std::int64_t seq_len,
                      profiler::Options& o) {
  for (long long tp : tps) {
    std::string why_none;
    bool any = false;
    for (auto [strategy, rows, cols] : std::vector<std::tuple<std::string, int, int>>{
             {"none", 0, 0}, {"domino", 2, 1}, {"domino", 4, 1}, {"domino", 2, 2}, {"domino", 1, 2}}) {
      sim::TargetInput in;
      in.model = model;
      in.cluster = "dgx-h100";
      in.nodes = 1;
      in.flags.tp = static_cast<int>(tp);  // dp: the rest of the node's GPUs (it does not change a rank's shapes)
      in.flags.strategy = &sim::find_strategy(strategy);
      if (rows) in.flags.row_slices = rows;
      in.flags.micro_batch = micro_batch > 0 ? micro_batch : std::max(1, rows);
      if (seq_len > 0) in.flags.seq_len = seq_len;
      if (cols) in.flags.col_slices = cols;
      sim::Target t;
      try {
        t = sim::resolve_target(in);
      } catch (const common::ConfigError& e) {
        if (why_none.empty()) why_none = e.what();
        continue;  // e.g. more row slices than the micro-batch has rows: not a plan the tuner asks about
      }
      any = true;
      const sim::StepGraph g = sim::build_step_graph(t.model, t.cluster, t.plan);
      for (std::size_t i = 0; i < g.size(); ++i) {
        const auto& task = g.tasks[i];
        if (auto* op = std::get_if<hardware::GemmOp>(&task.kind)) o.gemm_shapes.push_back(*op);
        else if (auto* op = std::get_if<hardware::AttentionOp>(&task.kind)) o.attention_shapes.push_back(*op);
        else if (auto* op = std::get_if<hardware::ElementwiseOp>(&task.kind)) {  // rows: its first input's (x, logits, tokens)
          const auto in = g.inputs(i);
          o.elementwise_shapes.push_back({.op = *op, .rows = in.empty() ? 1 : g.tensors[in[0]].rows});
        } else if (auto* op = std::get_if<hardware::OptimizerOp>(&task.kind)) o.optimizer_params.push_back(op->params);
      }
    }
    if (!any) cli::bad_flag("--tp", fmt::format("no plan of {} at tp {} resolves: {}", model, tp, why_none));
  }
}

void run_profile(const ProfileFlags& f, const std::string& command) {
  if (f.out.empty()) cli::bad_flag("--out", "required: the profile file to write");
  if (f.backend != "cpu" && f.backend != "cuda") cli::bad_flag("--backend", "expected cpu | cuda, got '" + f.backend + "'");
  for (long long tp : f.tp) cli::int_flag("--tp", tp, 1, 4096);
  if (!f.tp.empty() && f.model.empty()) cli::bad_flag("--tp", "sizes for --model's shapes: give --model too");
  // before any measurement: rank 0 writes the file at the end
  if (cli::launcher_rank() == 0) common::check_output_path(f.out, "--out");
  profiler::Options o{.backend = f.backend, .quick = f.quick, .command = command};
  if ((f.micro_batch != 0 || f.seq_len != 0) && f.model.empty())
    cli::bad_flag(f.micro_batch != 0 ? "--micro-batch" : "--seq-len", "needs --model (it sets the model's shapes)");
  if (f.micro_batch != 0) cli::int_flag("--micro-batch", f.micro_batch, 1, common::limits::kMaxMicroBatch);
  if (f.seq_len != 0) cli::int_flag("--seq-len", f.seq_len, 1, common::limits::kMaxSeqLen);
  if (!f.model.empty())
    add_model_shapes(f.model, f.tp.empty() ? std::vector<long long>{1, 2} : f.tp, static_cast<int>(f.micro_batch), f.seq_len, o);
  hardware::Profile p;
  try {
    p = executor::mpi_plugin::measure_profile(o);  // the profiler: in the MPI plug-in, loaded now
  } catch (const common::ConfigError&) {
    executor::mpi_plugin::profile_finish();  // bad input, found alike by every rank: main prints it once (rank 0)
    throw;
  } catch (const std::exception& e) {
    // a fault this rank saw (an MPI or device error): print it once, from here, and end the job,
    // since the other ranks may be waiting on this one
    std::fprintf(stderr, "slicetune: error: rank %d: %s\n", executor::mpi_plugin::profile_rank(), e.what());
    std::fflush(stderr);
    executor::mpi_plugin::profile_abort(3);
  }
  if (executor::mpi_plugin::profile_rank() == 0) {
    hardware::write_profile(f.out, p);
    fmt::print(stderr, "profile: wrote {} ({} GEMM, {} attention, {} element-wise, {} collective rows)\n", f.out, p.gemm.size(),
               p.attention.size(), p.elementwise.size(), p.collectives.size());
  }
  executor::mpi_plugin::profile_finish();
}

const bool registered = cli::register_command(50, "profile", "measure this machine's GEMM, attention, element-wise, collective and interference costs " "into a profile file (run under mpirun)", [](CLI::App* cmd) {
  auto flags = std::make_shared<ProfileFlags>();
  cmd->add_option("--backend", flags->backend, "cpu (OpenBLAS + MPI) | cuda (cuBLASLt + NCCL)")->capture_default_str();
  cmd->add_option("--out", flags->out, "profile file to write (YAML)")->required();
  cmd->add_option("--model", flags->model, "also measure this model's exact full and sliced shapes");
  cmd->add_option("--tp", flags->tp, "tensor-parallel sizes for --model's shapes (default 1 2)");
  cmd->add_option("--micro-batch", flags->micro_batch, "micro-batch of --model's shapes (default: the smallest each slicing allows)");
  cmd->add_option("--seq-len", flags->seq_len, "sequence length of --model's shapes (default: the model's)");
  cmd->add_flag("--quick", flags->quick, "smaller grids, fewer iterations (under a minute)");
  cmd->callback([flags, cmd] {
    std::string command = "slicetune profile --backend " + flags->backend + " --out " + flags->out;
    if (!flags->model.empty()) command += " --model " + flags->model;
    for (long long t : flags->tp) command += fmt::format(" --tp {}", t);
    if (flags->quick) command += " --quick";
    (void)cmd;
    run_profile(*flags, command);
  });
});

}  // namespace
