// slicetune import: what slicetune reads from a Hugging Face config.json, Megatron-LM / DeepSpeed-Domino
// arguments and a DeepSpeed config - every key or flag accounted for - and the plan it makes of them.
#include <fmt/format.h>

#include <iostream>

#include "cli/command.hpp"
#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "sim/hf_config.hpp"
#include "sim/report_json.hpp"

namespace {

struct ImportFlags {
  cli::TargetFlags target;
  std::string out;
  bool json = false;
};

void run_import(const ImportFlags& f) {
  const auto imp = f.target.imported();
  nlohmann::json j = {{"schema_version", cli::kJsonSchemaVersion}};
  if (sim::is_hf_config(f.target.model)) {
    const sim::HfImport hf = sim::load_hf_config(f.target.model);
    j["model_config"] = {{"source", hf.model.source}, {"family", hf.family}, {"read", hf.read}, {"not_modelled", hf.not_modelled},
                         {"ignored", hf.ignored}, {"unknown", hf.unknown}};
    if (!f.json) {
      fmt::print("model {} from {} (model_type {}):\n", hf.model.name, hf.model.source, hf.family);
      auto group = [](const char* title, const std::vector<std::string>& v) {
        fmt::print("{} ({}):\n", title, v.size());
        for (const auto& x : v) fmt::print("  {}\n", x);
      };
      group("read", hf.read);
      group("not modelled (the prediction leaves them out)", hf.not_modelled);
      group("ignored (no effect on one step's cost)", hf.ignored);
      group("unknown (not read)", hf.unknown);
      fmt::print("\n");
    }
  }
  if (!imp && !sim::is_hf_config(f.target.model))
    throw common::ConfigError("import", "", "nothing to import: give --model config.json, --megatron-args, --megatron-args-file or --deepspeed-config");
  if (imp) {
    const sim::Target t = f.target.resolve(false);
    const auto problem = sim::check_plan(t.model, t.cluster, t.plan);
    auto flags = [](const std::vector<bridge::ImportedFlag>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& x : v) a.push_back({{"flag", x.name}, {"value", x.value}, {"what", x.what}});
      return a;
    };
    j["arguments"] = {{"source", imp->source}, {"modelled", flags(imp->modelled)}, {"not_modelled", flags(imp->not_modelled)},
                      {"ignored", flags(imp->ignored)}, {"unknown", flags(imp->unknown)}, {"environment", imp->env}};
    j["model"] = t.model.name;
    j["cluster"] = t.cluster.name;
    j["nodes"] = t.cluster.nodes;
    j["plan"] = sim::plan_json(t.plan);
    if (problem) j["plan_problem"] = problem->key + ": " + problem->message;
    if (!f.out.empty()) {
      if (problem) throw common::ConfigError(t.plan_source, problem->key, problem->message);
      common::write_file_atomically(f.out, sim::plan_to_yaml(t.plan, "slicetune import: " + imp->source));
    }
    if (!f.json) {
      fmt::print("{}", bridge::import_report(*imp));
      fmt::print("\nmodel {} ({} layers, hidden {}, {} heads, {} kv heads, ffn {}, vocab {}) on {} x {}\nplan: {}{}\n", t.model.name,
                 t.model.layers, t.model.hidden, t.model.heads, t.model.kv_heads, t.model.ffn_hidden, t.model.vocab, t.cluster.nodes,
                 t.cluster.name, sim::describe(t.plan), problem ? " (slicetune cannot simulate it: " + problem->message + ")" : "");
      if (!f.out.empty()) fmt::print("wrote {} (slicetune simulate --plan {})\n", f.out, f.out);
    }
  }
  if (f.json) std::cout << j.dump(2) << "\n";
}

const bool registered = cli::register_command(8, "import", "read a Hugging Face config.json, Megatron-LM / DeepSpeed-Domino arguments or a DeepSpeed config: " "what is modelled, not modelled, ignored, unknown, and the plan", [](CLI::App* cmd) {
  auto f = std::make_shared<ImportFlags>();
  cli::add_target_flags(cmd, f->target);
  cmd->add_option("--out", f->out, "write the imported plan as a plan YAML file (for simulate --plan)");
  cmd->add_flag("--json", f->json, "print one JSON object");
  cmd->callback([f] { run_import(*f); });
});

}  // namespace
