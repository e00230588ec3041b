// slicetune check: will Megatron-LM / DeepSpeed-Domino / NeMo accept the plan, does it fit, which environment it needs.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "bridge/check.hpp"
#include "bridge/strategy_support.hpp"
#include "cli/command.hpp"
#include "common/config_reader.hpp"
#include "sim/strategy.hpp"


namespace {

struct CheckFlags {
  cli::TargetFlags target;
  std::string framework = "megatron";
  std::vector<std::string> env;
  bool json = false, all = false, no_environment = false, rules = false;
  double reserve_gb = 0.0;
};

void run_check(const CheckFlags& f) {
  if (f.rules) {
    std::cout << bridge::rules_markdown();
    return;
  }
  const auto fw = bridge::parse_framework(f.framework, "--framework");
  if (!(f.reserve_gb >= 0) || f.reserve_gb > 1e6) cli::bad_flag("--reserve-gb", "expected a number of GB >= 0");
  auto imp = f.target.imported();
  sim::Target t;
  if (imp) {
    // the framework's own arguments: a plan they do not give a strategy runs the framework's own schedule
    // (DeepSpeed-Domino: domino 2x1 along the batch), unless flags say which
    bool flagged = f.target.cmd->count("--strategy") > 0;
    for (const sim::Knob* k : sim::plan_knobs()) flagged |= f.target.cmd->count(std::string(k->flag)) > 0;
    if (!flagged) bridge::apply_own_schedule(fw, imp->plan);
    sim::TargetInput in = f.target.input();
    if (!f.target.cmd->count("--model") && imp->model.complete()) in.model.clear();
    t = bridge::resolve_imported(*imp, in, false);
  } else {
    t = f.target.resolve(false);
  }
  bridge::CheckInput in{.model = t.model, .cluster = t.cluster, .plan = t.plan, .imported = imp ? &*imp : nullptr, .environment = {},
                        .reserve_gb = f.reserve_gb};
  if (imp) in.environment = imp->env;
  if (!f.no_environment && !f.target.cmd->count("--env"))
    if (const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")) in.environment["CUDA_DEVICE_MAX_CONNECTIONS"] = v;
  for (const auto& kv : f.env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) cli::bad_flag("--env", "expected VAR=value, got '" + kv + "'");
    in.environment[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto findings = bridge::preflight(fw, in);
  if (!f.all) std::erase_if(findings, [](const bridge::Finding& x) { return x.severity == bridge::Severity::ok; });
  const int errors = static_cast<int>(std::count_if(findings.begin(), findings.end(), [](const auto& x) { return x.severity == bridge::Severity::error; }));
  if (f.json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : findings)
      a.push_back({{"severity", bridge::to_string(x.severity)}, {"rule", x.rule}, {"message", x.message}, {"source", x.source}});
    std::cout << nlohmann::json{{"schema_version", cli::kJsonSchemaVersion}, {"framework", bridge::to_string(fw)}, {"model", t.model.name}, {"cluster", t.cluster.name},
                                {"plan", sim::describe(t.plan)}, {"errors", errors}, {"findings", a}}
                     .dump(2)
              << "\n";
  } else {
    fmt::print("slicetune check: {} on {} x {} for {}: {}\n", t.model.name, t.cluster.nodes, t.cluster.name, bridge::to_string(fw), sim::describe(t.plan));
    fmt::print("{}", bridge::check_table(findings));
    fmt::print("{}\n", errors ? fmt::format("{} error(s): {} would not run this plan as given", errors, bridge::to_string(fw))
                              : fmt::format("no errors: {} accepts this plan", bridge::to_string(fw)));
  }
  if (errors) throw cli::CommandFailed(fmt::format("check: {} error(s) for {}", errors, bridge::to_string(fw)));
}

const bool registered = cli::register_command(30, "check", "preflight: will megatron | deepspeed-domino | nemo accept the plan, does it fit, which environment it needs", [](CLI::App* cmd) {
  auto f = std::make_shared<CheckFlags>();
  cli::add_target_flags(cmd, f->target);
  cmd->add_option("--framework", f->framework, "megatron | deepspeed-domino (or deepspeed) | nemo")->capture_default_str();
  cmd->add_option("--env", f->env, "VAR=value of the launch environment to check (repeatable; default: this shell's CUDA_DEVICE_MAX_CONNECTIONS)");
  cmd->add_flag("--no-environment", f->no_environment, "do not read this shell's environment");
  cmd->add_option("--reserve-gb", f->reserve_gb, "extra GPU memory to keep free beyond the modelled breakdown (which has the CUDA context, NCCL buffers and the cluster file's fragmentation reserve)")
      ->capture_default_str();
  cmd->add_flag("--all", f->all, "also list the checks that passed");
  cmd->add_flag("--rules", f->rules, "print every rule (with those the registered strategies' declarations imply) as a Markdown table and exit");
  cmd->add_flag("--json", f->json, "print one JSON object");
  cmd->callback([f] { run_check(*f); });
});

}  // namespace
