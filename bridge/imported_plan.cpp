#include "bridge/imported_plan.hpp"

#include <fmt/format.h>

#include "common/config_reader.hpp"

namespace bridge {

bool ModelOverrides::any() const {
  return layers || heads || kv_heads || hidden || ffn_hidden || vocab || max_positions || norm || activation || position || tied_embeddings;
}

void ImportedPlan::merge(const ImportedPlan& o) {
  plan.merge(o.plan);
  auto take = [](auto& dst, const auto& src) { if (src) dst = src; };
  take(model.layers, o.model.layers); take(model.heads, o.model.heads); take(model.kv_heads, o.model.kv_heads);
  take(model.hidden, o.model.hidden); take(model.ffn_hidden, o.model.ffn_hidden); take(model.vocab, o.model.vocab);
  take(model.max_positions, o.model.max_positions); take(model.norm, o.model.norm); take(model.activation, o.model.activation);
  take(model.position, o.model.position); take(model.tied_embeddings, o.model.tied_embeddings);
  take(world_size, o.world_size); take(nodes, o.nodes); take(pp, o.pp); take(layers_per_virtual_stage, o.layers_per_virtual_stage);
  modelled.insert(modelled.end(), o.modelled.begin(), o.modelled.end());
  not_modelled.insert(not_modelled.end(), o.not_modelled.begin(), o.not_modelled.end());
  ignored.insert(ignored.end(), o.ignored.begin(), o.ignored.end());
  unknown.insert(unknown.end(), o.unknown.begin(), o.unknown.end());
  for (const auto& [k, v] : o.env) env[k] = v;
  for (const auto& [k, v] : o.flags) flags[k] = v;
  source = source.empty() ? o.source : source + " + " + o.source;
}

namespace {
void validate(const sim::ModelSpec& m, const std::string& source) {
  if (m.hidden % m.heads != 0)
    throw common::ConfigError(source, "--num-attention-heads", fmt::format("hidden={} is not divisible by heads={}", m.hidden, m.heads));
  if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0)
    throw common::ConfigError(source, "--num-query-groups", fmt::format("heads={} is not divisible by kv_heads={}", m.heads, m.kv_heads));
  if (m.position == sim::Position::rope && m.head_dim() % 2 != 0)
    throw common::ConfigError(source, "--position-embedding-type", fmt::format("rope needs an even head_dim, got {}", m.head_dim()));
}
}  // namespace

sim::ModelSpec apply_model(const sim::ModelSpec& base, const ModelOverrides& o, const std::string& source) {
  sim::ModelSpec m = base;
  if (o.layers) m.layers = *o.layers;
  if (o.hidden) m.hidden = *o.hidden;
  if (o.heads) m.heads = *o.heads;
  if (o.kv_heads) m.kv_heads = *o.kv_heads;
  if (o.ffn_hidden) m.ffn_hidden = *o.ffn_hidden;
  if (o.vocab) m.vocab = *o.vocab;
  if (o.max_positions) m.seq_len = *o.max_positions;
  if (o.norm) m.norm = *o.norm;
  if (o.activation) m.activation = *o.activation;
  if (o.position) m.position = *o.position;
  if (o.tied_embeddings) m.tied_embeddings = *o.tied_embeddings;
  validate(m, source);
  return m;
}

sim::ModelSpec model_from_overrides(const ModelOverrides& o, std::int64_t seq_len, const std::string& name, const std::string& source) {
  if (!o.complete())
    throw common::ConfigError(source, "", "no --model given and the arguments do not describe one (need --num-layers, --hidden-size, "
                                          "--num-attention-heads and --vocab-size)");
  sim::ModelSpec m;
  m.name = name;
  m.source = source;
  m.seq_len = seq_len;
  m.kv_heads = *o.heads;
  return apply_model(m, o, source);
}

std::string import_report(const ImportedPlan& p) {
  std::string out = fmt::format("imported from {}\n", p.source);
  auto group = [&](const char* title, const std::vector<ImportedFlag>& v) {
    out += fmt::format("{} ({}):\n", title, v.size());
    for (const auto& f : v) out += fmt::format("  {}{}{}  ->  {}\n", f.name, f.value.empty() ? "" : " ", f.value, f.what);
  };
  group("modelled", p.modelled);
  group("not modelled yet (the prediction leaves them out)", p.not_modelled);
  group("ignored (no effect on one step's cost)", p.ignored);
  group("unknown (not read)", p.unknown);
  if (!p.env.empty()) {
    out += "environment:\n";
    for (const auto& [k, v] : p.env) out += fmt::format("  {}={}\n", k, v);
  }
  return out;
}

sim::Target resolve_imported(const ImportedPlan& imp, const sim::TargetInput& in, bool check) {
  sim::Target t;
  const bool have_model = !in.model.empty();
  const std::int64_t seq = imp.plan.seq_len.value_or(imp.model.max_positions.value_or(2048));
  if (have_model) t.model = apply_model(sim::load_model(in.model), imp.model, imp.source);
  else t.model = model_from_overrides(imp.model, imp.model.max_positions.value_or(seq), "imported", imp.source);
  t.cluster = in.cluster_spec ? *in.cluster_spec : hardware::load_cluster(in.cluster);
  if (in.nodes) {
    if (*in.nodes <= 0) throw common::ConfigError("--nodes", "", "expected a positive number of nodes");
    t.cluster.nodes = *in.nodes;
  } else if (imp.nodes) {
    t.cluster.nodes = *imp.nodes;
  } else if (imp.world_size && *imp.world_size % t.cluster.node.gpus_per_node == 0) {
    t.cluster.nodes = *imp.world_size / t.cluster.node.gpus_per_node;
  }
  sim::PlanInput pi;
  t.plan_source = imp.source;
  if (!in.plan_file.empty()) {
    pi = sim::load_plan_input(in.plan_file);
    t.plan_source = in.plan_file + " + " + imp.source;
  }
  sim::PlanInput framework = imp.plan;
  if (imp.layers_per_virtual_stage) {
    // Megatron-LM: vp = layers / (pp x layers per virtual stage), which must divide exactly
    const int pp = framework.pp.value_or(1), k = *imp.layers_per_virtual_stage;
    if (pp < 2) throw common::ConfigError(imp.source, "--num-layers-per-virtual-pipeline-stage", "needs --pipeline-model-parallel-size > 1");
    if (t.model.layers % (pp * k))
      throw common::ConfigError(imp.source, "--num-layers-per-virtual-pipeline-stage",
                                fmt::format("{} layers are not divisible by pp x {} = {} x {}", t.model.layers, k, pp, k));
    framework.vp = t.model.layers / (pp * k);
    if (*framework.vp > 1) framework.schedule = sim::PipelineSchedule::interleaved;
  }
  pi.merge(framework);
  pi.merge(in.flags);
  if (check) {
    t.plan = sim::resolve_plan(t.model, t.cluster, pi, t.plan_source);
    return t;
  }
  // unchecked (bridge::check reports what is wrong): a pp that does not divide the GPUs / tp cannot
  // give dp its default, so the plan is filled without it and gets it back as the framework was asked
  const int pp = pi.pp.value_or(1), tp = pi.tp.value_or(1);
  if (!pi.dp && pp > 1 && t.cluster.total_gpus() % (static_cast<long long>(tp) * pp) != 0) {
    sim::PlanInput q = pi;
    q.pp.reset();
    q.vp.reset();
    t.plan = sim::fill_plan(t.model, t.cluster, q, t.plan_source);
    t.plan.pp = pp;
    return t;
  }
  t.plan = sim::fill_plan(t.model, t.cluster, pi, t.plan_source);
  return t;
}

}  // namespace bridge
