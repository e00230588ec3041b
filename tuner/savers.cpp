#include "tuner/savers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/table.hpp"
#include "sim/strategy.hpp"
#include "tuner/search.hpp"

namespace tuner {

namespace {
/// `p` with each saver varied alone, and each variant's row name, in the table's order
void saver_variants(const sim::Plan& p, std::vector<sim::Plan>& variants, std::vector<std::string>* names) {
  auto add = [&](const sim::Plan& q, auto&& name) {
    variants.push_back(q);
    if (names) names->push_back(name());
  };
  for (auto rc : {sim::Recompute::none, sim::Recompute::selective, sim::Recompute::full}) {
    sim::Plan q = p;
    q.recompute = rc;
    q.recompute_method = sim::RecomputeMethod::uniform;
    q.recompute_layers = 1;
    add(q, [&] { return fmt::format("recompute {}", sim::to_string(rc)); });
    if (rc == sim::Recompute::full && p.recompute == rc && !(p.recompute_method == q.recompute_method && p.recompute_layers == 1))
      add(p, [&] { return fmt::format("recompute full, {} {}", sim::to_string(p.recompute_method), p.recompute_layers); });
  }
  if (p.dp > 1)  // ZeRO-2/3 with pipeline parallelism: a row that says why it is refused (sim::check_plan)
    for (int z = 0; z <= sim::kMaxZeroStage; ++z) {
      sim::Plan q = p;
      q.zero = z;
      add(q, [&] { return fmt::format("zero {}", z); });
    }
  for (auto k : sim::attention_choices(p.stack_attention)) {
    sim::Plan q = p;
    q.attention = k;
    add(q, [&] { return fmt::format("attention {}", hardware::to_string(k)); });
  }
}
}  // namespace

std::vector<sim::Plan> saver_simulations(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const sim::Plan& p) {
  std::vector<sim::Plan> variants, out;
  saver_variants(p, variants, nullptr);
  for (const sim::Plan& q : variants)
    if (std::find(out.begin(), out.end(), q) == out.end() && !sim::check_plan(model, cluster, q)) out.push_back(q);
  return out;
}

std::vector<SaverRow> explain_savers(const Evaluator& ev, const sim::Plan& p, int threads,
                                     std::span<const std::pair<const sim::Plan*, common::Duration>> known) {
  std::vector<sim::Plan> variants;
  std::vector<std::string> names;
  saver_variants(p, variants, &names);
  std::vector<SaverRow> rows(variants.size());
  for (std::size_t i = 0; i < variants.size(); ++i) {
    auto& r = rows[i];
    r.setting = names[i];
    r.plan = variants[i];
    r.is_plan = variants[i] == p;
    if (auto why = sim::check_plan(ev.model(), ev.cluster(), variants[i])) {
      r.invalid = why->message;
      continue;
    }
    r.memory = sim::estimate_memory(ev.model(), ev.cluster(), variants[i]);
  }
  // each distinct valid plan simulated once (a row may be the plan under its own setting of a
  // saver), the simulations in parallel
  std::vector<std::size_t> first(variants.size()), distinct;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    first[i] = i;
    if (!!rows[i].invalid) continue;
    for (std::size_t j = 0; j < i; ++j)
      if (!rows[j].invalid && variants[j] == variants[i]) {
        first[i] = j;
        break;
      }
    if (first[i] != i) continue;
    const auto k = std::find_if(known.begin(), known.end(), [&](const auto& kp) { return *kp.first == variants[i]; });
    if (k != known.end()) rows[i].step_time = k->second;
    else distinct.push_back(i);
  }
  parallel_for(distinct.size(), threads, [&](std::size_t k) { rows[distinct[k]].step_time = ev.simulate(variants[distinct[k]]).step_time; });
  for (std::size_t i = 0; i < variants.size(); ++i)
    if (!rows[i].invalid && first[i] != i) rows[i].step_time = rows[first[i]].step_time;
  return rows;
}

std::string savers_table(const std::vector<SaverRow>& rows) {
  const SaverRow* own = nullptr;
  for (const auto& r : rows)
    if (r.is_plan && !r.invalid) own = &r;
  common::Table t({"memory saver", "step time", "vs plan", "memory", "vs plan", "fits"}, {"", "ms", "ms", "GB", "GB", ""});
  for (const auto& r : rows) {
    const std::string name = r.setting + (r.is_plan ? " (plan)" : "");
    if (r.invalid) {
      t.row({name, "-", "-", "-", "-", "cannot run: " + *r.invalid});
      continue;
    }
    const std::string fits = r.memory.fits() ? "yes" : fmt::format("no, {:.1f} GB over", r.memory.over() / 1e9);
    t.row({name, fmt::format("{:.1f}", r.step_time.ms()), own ? fmt::format("{:+.1f}", r.step_time.ms() - own->step_time.ms()) : "-",
           fmt::format("{:.1f}", r.memory.total() / 1e9), own ? fmt::format("{:+.1f}", (r.memory.total() - own->memory.total()) / 1e9) : "-",
           fits});
  }
  return t.str();
}

nlohmann::json savers_json(const std::vector<SaverRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json j = {{"setting", r.setting}, {"is_plan", r.is_plan}};
    if (r.invalid) {
      j["invalid"] = *r.invalid;
    } else {
      j["step_time_ms"] = r.step_time.ms();
      j["memory_gb"] = r.memory.total() / 1e9;
      j["fits"] = r.memory.fits();
      j["over_gb"] = r.memory.over() / 1e9;
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace tuner
