// slicetune validate: predicted (simulator) vs measured (executor) per step and per task class.
#ifdef SLICETUNE_HAVE_EXECUTOR
#include <fmt/format.h>

#include <iostream>

#include "cli/command.hpp"
#include "cli/rank_errors.hpp"
#include "common/limits.hpp"
#include "executor/backend.hpp"
#include "executor/mpi_session.hpp"
#include "executor/report.hpp"
#include "validate/compare.hpp"
#include "executor/run.hpp"
#include "executor/run_target.hpp"
#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/trace.hpp"

namespace {

struct ValidateFlags {
  cli::TargetFlags target;
  std::string measured, backend = "cpu", trace;
  long long steps = 20, warmup = 2, threads = 1;
  double watchdog_s = 20;
  bool json = false;
};

/// The cost model validate predicts with: analytic for the cluster, or a measured profile (--profile).
std::unique_ptr<hardware::CostModel> cost_model_for(const ValidateFlags& f, const hardware::ClusterSpec& c) {
  return f.target.cost_model(c);
}

void run_validate(const ValidateFlags& f) {
  if (cli::launcher_rank() == 0) common::check_output_path(f.trace, "--trace");
  validate::MeasuredRun m;
  sim::Target t;
  std::string measured_from;
  std::unique_ptr<executor::MpiSession> mpi;
  if (!f.measured.empty()) {
    m = validate::parse_run_json(common::read_text_file(f.measured), f.measured);
    t = executor::resolve_run_target(f.target.input(), m.ranks);
    measured_from = f.measured;
  } else {
    executor::BackendKind kind;
    if (!executor::parse_backend_kind(f.backend, kind)) cli::bad_flag("--backend", "expected cpu | cuda, got '" + f.backend + "'");
    const int steps = static_cast<int>(cli::int_flag("--steps", f.steps, 1, common::limits::kMaxSteps));
    if (f.warmup < 0 || f.warmup >= steps) cli::bad_flag("--warmup", fmt::format("expected 0 <= warmup < steps = {}", steps));
    const int warmup = static_cast<int>(f.warmup);
    cli::int_flag("--threads", f.threads, 1, common::limits::kMaxThreads);
    cli::number_flag("--watchdog-s", f.watchdog_s, 0, 3600);
    mpi = std::make_unique<executor::MpiSession>();
    bool rank0 = true;
    cli::on_every_rank(*mpi, [&] {
      t = executor::resolve_run_target(f.target.input(), mpi->size());
      const sim::StepGraph g = sim::build_step_graph(t.model, t.cluster, t.plan, mpi->rank());
      auto backend = executor::make_backend(kind, {.world_rank = mpi->rank(), .world_size = mpi->size(), .tp = t.plan.tp, .dp = t.plan.dp,
                                                   .device = -1, .cpu_threads = static_cast<int>(f.threads), .watchdog_s = f.watchdog_s});
      if (mpi->rank() == 0) fmt::print(stderr, "validate: running {} steps on {}\n", steps, backend->describe());
      const auto r = executor::train(g, *backend, {.steps = steps, .warmup = warmup, .training = {}, .on_step = {}, .watchdog_s = f.watchdog_s});
      rank0 = mpi->rank() == 0;
      if (!rank0) return;
      m = validate::parse_run_json(executor::run_json(t, g, r, backend->describe(), mpi->size()).dump(), "run");
      measured_from = fmt::format("this run ({} steps, {} warm-up, {})", steps, warmup, backend->describe());
    });
    if (!rank0) return;
  }

  auto cost = cost_model_for(f, t.cluster);
  const auto result = validate::validate_run(t, m, *cost, f.measured.empty() ? "run" : f.measured);
  const auto& v = result.validation;
  if (!f.trace.empty())
    sim::ChromeTrace().add("predicted", result.predicted).add("measured rank 0", *result.graph, m.timeline).write(f.trace);
  if (f.json) {
    std::cout << validate::validation_json(t, v, cost->describe(), measured_from).dump(2) << "\n";
    return;
  }
  fmt::print("slicetune validate: {} on {}, {} cost model\n", t.model.name, t.cluster.name, cost->describe());
  fmt::print("plan ({}): {}; measured: {}\n", t.plan_source, sim::describe(t.plan), measured_from);
  fmt::print("per class: summed task durations in the step's last micro-batch; error = (predicted - measured) / measured\n\n");
  fmt::print("{}", validate::validation_table(v));
  if (!f.trace.empty()) fmt::print("\ntrace: {} (predicted and measured side by side; https://ui.perfetto.dev)\n", f.trace);
}

const bool registered = cli::register_command(45, [](CLI::App& app) {
  auto flags = std::make_shared<ValidateFlags>();
  flags->target.cluster = "cpu-host";
  auto* cmd = app.add_subcommand("validate", "compare the simulator's prediction of a plan with a measured run");
  cli::add_target_flags(cmd, flags->target);
  cmd->add_option("--measured", flags->measured, "a `slicetune run --out` / `--json` file (default: run the plan now, under mpirun)");
  cmd->add_option("--backend", flags->backend, "when running: cpu | cuda")->capture_default_str();
  cmd->add_option("--steps", flags->steps, "when running: training steps")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "when running: warm-up steps")->capture_default_str();
  cmd->add_option("--threads", flags->threads, "when running on cpu: OpenBLAS threads per rank")->capture_default_str();
  cmd->add_option("--watchdog-s", flags->watchdog_s,
                  "when running: abort the job when an exchange makes no progress for this many seconds (0: never)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print one JSON object instead of the table");
  cmd->add_option("--trace", flags->trace, "write predicted and measured timelines side by side as a Chrome trace");
  cmd->callback([flags] { run_validate(*flags); });
});

}  // namespace

#else  // built without MPI or OpenBLAS: the command exists and says so
#include "cli/command.hpp"
#include "common/config_reader.hpp"

namespace {
const bool registered = cli::register_command(45, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "compare the simulator's prediction of a plan with a measured run");
  cmd->allow_extras();
  cmd->callback([] { throw common::ConfigError("validate", "", "this slicetune was built without MPI or OpenBLAS (the executor); install them and rebuild"); });
});
}  // namespace
#endif
