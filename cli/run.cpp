// slicetune run: real training steps of a plan's step graph on a backend (CPU: OpenBLAS + MPI).
#ifdef SLICETUNE_HAVE_EXECUTOR
#include <fmt/format.h>

#include <iostream>

#include "cli/command.hpp"
#include "cli/rank_errors.hpp"
#include "common/limits.hpp"
#include "executor/backend.hpp"
#include "executor/mpi_plugin.hpp"
#include "executor/report.hpp"
#include "executor/run.hpp"
#include "executor/run_target.hpp"
#include "common/atomic_write.hpp"
#include "common/table.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/trace.hpp"

namespace {

namespace mpi_plugin = executor::mpi_plugin;  // MPI and the executor: the MPI plug-in, loaded when a Session starts

struct RunFlags {
  cli::TargetFlags target;
  std::string backend = "cpu";
  long long steps = 20, warmup = 2, threads = 1;
  std::uint64_t seed = 1234;
  double lr = 3e-3;
  double watchdog_s = 20;
  bool json = false, quiet = false;
  std::string trace, out, dump_grads;
};

void run_ranks(const RunFlags& f, const mpi_plugin::Session& mpi, executor::BackendKind kind, int steps, int warmup);

void run_run(const RunFlags& f) {
  if (!f.target.profile.empty())
    cli::bad_flag("--profile", "run measures a plan on this machine; a profile prices predictions (use it with simulate, tune or validate)");
  executor::BackendKind kind;
  if (!executor::parse_backend_kind(f.backend, kind)) cli::bad_flag("--backend", "expected cpu | cuda, got '" + f.backend + "'");
  const int steps = static_cast<int>(cli::int_flag("--steps", f.steps, 1, common::limits::kMaxSteps));
  const int warmup = static_cast<int>(f.target.cmd->count("--warmup") ? f.warmup : std::min<long long>(f.warmup, steps - 1));
  if (warmup < 0 || warmup >= steps) cli::bad_flag("--warmup", fmt::format("expected 0 <= warmup < steps = {}", steps));
  cli::int_flag("--threads", f.threads, 1, common::limits::kMaxThreads);
  cli::number_flag("--lr", f.lr, 0, 1, true);  // AdamW learning rates are ~1e-4 .. 1e-2
  cli::number_flag("--watchdog-s", f.watchdog_s, 0, 3600);
  // before MPI starts and any work: rank 0 writes the outputs
  if (cli::launcher_rank() == 0) {
    common::check_output_path(f.trace, "--trace");
    common::check_output_path(f.out, "--out");
    common::check_output_path(f.dump_grads, "--dump-grads");
  }
  mpi_plugin::Session mpi;  // MPI and the executor: the MPI plug-in, loaded now
  cli::on_every_rank(mpi, [&] { run_ranks(f, mpi, kind, steps, warmup); });
}

void run_ranks(const RunFlags& f, const mpi_plugin::Session& mpi, executor::BackendKind kind, int steps, int warmup) {
  const sim::Target t = executor::resolve_run_target(f.target.input(), mpi.size());
  const sim::StepGraph g = sim::build_step_graph(t.model, t.cluster, t.plan, mpi.rank());
  auto backend = mpi_plugin::make_backend(kind, {.world_rank = mpi.rank(), .world_size = mpi.size(), .tp = t.plan.tp, .dp = t.plan.dp, .pp = t.plan.pp,
                                                 .pipeline_wraps = t.plan.vp > 1, .tp_channels = t.plan.tp_channels, .device = -1, .cpu_threads = static_cast<int>(f.threads),
                                                 .watchdog_s = f.watchdog_s});
  executor::RunOptions o{.steps = steps, .warmup = warmup, .training = {.seed = f.seed, .lr = f.lr}, .on_step = {}, .watchdog_s = f.watchdog_s};
  if (!f.quiet)
    // called from the MPI plug-in's training loop: nothing may be thrown back into it (common/plugin_error.hpp);
    // a progress line that cannot be written is not a reason to stop training
    o.on_step = [&](int step, double ms, double loss) noexcept {
      try {
        fmt::print(stderr, "step {:>3}/{}: {:9.3f} ms  loss {:.4f}\n", step + 1, steps, ms, loss);
      } catch (...) {
      }
    };
  const executor::RunResult r = mpi_plugin::train(g, *backend, o, !f.dump_grads.empty());
  if (mpi.rank() != 0) return;

  const auto j = executor::run_json(t, g, r, backend->describe(), mpi.size());
  if (!f.out.empty()) common::write_file_atomically(f.out, j.dump(1) + "\n");
  if (!f.trace.empty()) {
    sim::ChromeTrace trace;
    // every rank's own graph: pipeline stages differ
    std::vector<sim::StepGraph> others;
    others.reserve(r.timelines.size());
    for (std::size_t k = 0; k < r.timelines.size(); ++k) {
      const bool same = t.plan.pp == 1 || sim::pipeline_position(t.plan, static_cast<int>(k)).stage == 0;
      if (!same) others.push_back(sim::build_step_graph(t.model, t.cluster, t.plan, static_cast<int>(k)));
      trace.add(fmt::format("measured rank {}", k), same ? g : others.back(), executor::to_task_timing(r.timelines[k]));
    }
    trace.write(f.trace);
  }
  if (!f.dump_grads.empty()) {
    nlohmann::json d = {{"schema_version", cli::kJsonSchemaVersion}, {"loss", r.loss}, {"grads", nlohmann::json::object()}};
    for (const auto& [name, v] : r.first_step_grads) d["grads"][name] = v;
    common::write_file_atomically(f.dump_grads, d.dump() + "\n");
  }
  if (f.json) {
    std::cout << j.dump(1) << "\n";
    return;
  }
  fmt::print("slicetune run: {} on {}, cluster {}\n", t.model.name, backend->describe(), t.cluster.name);
  fmt::print("plan ({}): {}, global batch {} ({} micro-batch{}), seq {}, {}\n\n", t.plan_source, sim::describe(t.plan), t.plan.global_batch,
             t.plan.grad_accum_steps(), t.plan.grad_accum_steps() > 1 ? "es" : "", t.plan.seq_len, common::to_string(t.plan.dtype));
  common::Table table({"quantity", "value", "unit"}, {"", "", ""});
  table.row({"steps (warm-up)", fmt::format("{} ({})", steps, r.warmup), ""});
  table.row({"step time (median)", fmt::format("{:.3f}", r.step_time_ms), "ms"});
  table.row({"step time min / max", fmt::format("{:.3f} / {:.3f}", r.step_time_min_ms, r.step_time_max_ms), "ms"});
  table.row({"step time stdev", fmt::format("{:.3f}", r.step_time_stdev_ms), "ms"});
  table.row({"throughput", fmt::format("{:.0f}", r.tokens_per_s), "tokens/s"});
  table.row({"loss first -> last", fmt::format("{:.4f} -> {:.4f}", r.loss.front(), r.loss.back()), "nats"});
  table.row({"TP comm busy", fmt::format("{:.3f}", r.overlap.comm_busy_ms), "ms"});
  table.row({"TP comm beside compute", fmt::format("{:.3f} ({:.0f} %)", r.overlap.overlapped_ms, 100 * r.overlap.fraction()), "ms"});
  fmt::print("{}", table.str());
  if (!f.trace.empty()) fmt::print("\ntrace: {} (open in https://ui.perfetto.dev or chrome://tracing)\n", f.trace);
  if (!f.out.empty()) fmt::print("measurements: {} (slicetune validate --measured {})\n", f.out, f.out);
}

const bool registered = cli::register_command(40, "run", "run real training steps of a plan (launch with mpirun -np tp x dp x pp)", [](CLI::App* cmd) {
  auto flags = std::make_shared<RunFlags>();
  flags->target.cluster = "cpu-host";
  cli::add_target_flags(cmd, flags->target, true, cli::executor_defaults_help());
  cmd->add_option("--backend", flags->backend, "cpu (OpenBLAS + MPI) | cuda (cuBLASLt + NCCL)")->capture_default_str();
  cmd->add_option("--steps", flags->steps, "training steps, warm-up included")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "first steps left out of the step-time statistics (default 2, fewer when steps <= 2)")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "seed of the weights and the synthetic tokens")->capture_default_str();
  cmd->add_option("--lr", flags->lr, "AdamW learning rate")->capture_default_str();
  cmd->add_option("--threads", flags->threads, "cpu: OpenBLAS threads per rank")->capture_default_str();
  cmd->add_option("--watchdog-s", flags->watchdog_s,
                  "abort the job when a collective or exchange makes no progress for this many seconds, naming the ranks it "
                  "waited on (0: never)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print one JSON object (rank 0) instead of the table");
  cmd->add_flag("--quiet", flags->quiet, "no per-step progress on stderr");
  cmd->add_option("--trace", flags->trace, "write the measured timeline (every rank, median step) as a Chrome trace");
  cmd->add_option("--out", flags->out, "also write the --json object to this file (for validate --measured)");
  cmd->add_option("--dump-grads", flags->dump_grads, "write the first step's full weight gradients and the losses as JSON (tests)");
  cmd->callback([flags] { run_run(*flags); });
});

}  // namespace

#else  // built without MPI or OpenBLAS: the command exists and says so
#include "cli/command.hpp"
#include "common/config_reader.hpp"

namespace {
const bool registered = cli::register_command(40, "run", "run real training steps of a plan (launch with mpirun -np tp x dp x pp)", [](CLI::App* cmd) {
  cmd->allow_extras();
  cmd->callback([] { throw common::ConfigError("run", "", "this slicetune was built without MPI or OpenBLAS (the executor); install them and rebuild"); });
});
}  // namespace
#endif
