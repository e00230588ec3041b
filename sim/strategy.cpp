// The registry of overlap strategies: the built-ins below, then whatever register_strategy adds.
#include "sim/strategy.hpp"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>

#include "common/config_reader.hpp"

namespace sim {

namespace {

struct Registry {
  std::vector<const Strategy*> strategies;
  std::vector<const Knob*> knobs;             // plan_knobs(), kept current by add()
  std::vector<std::vector<const Knob*>> own;  // per strategy, per plan knob: its own knob of that key, or null

  void add(const Strategy& s) {
    strategies.push_back(&s);
    for (const Knob& k : s.knobs) {
      bool seen = false;
      for (const Knob* o : knobs) seen |= o->key == k.key;
      if (!seen) knobs.push_back(&k);
    }
    own.clear();
    for (const Strategy* t : strategies) {
      own.emplace_back();
      for (const Knob* k : knobs) own.back().push_back(t->knob(k->key));
    }
  }
};

Registry& registry() {
  static Registry r = [] {
    Registry b;
    // The built-in strategies, one line each; the first is the default plan's and the tuner's baseline.
    b.add(strategy_none());
    b.add(strategy_domino());
    b.add(strategy_te_pipelined());
    b.add(strategy_async_tp());
    b.add(strategy_te_bulk());
    b.add(strategy_fused());
    return b;
  }();
  return r;
}

}  // namespace

std::string Knob::format(int value) const {
  if (!choices.empty() && value >= 0 && value < static_cast<int>(choices.size()))
    return std::string(choices[static_cast<std::size_t>(value)]);
  return fmt::format("{}", value);
}

std::optional<int> Knob::parse(std::string_view text) const {
  if (!choices.empty()) {
    for (std::size_t i = 0; i < choices.size(); ++i)
      if (choices[i] == text) return static_cast<int>(i);
    return std::nullopt;
  }
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) return std::nullopt;
  return v;
}

std::string Knob::expected() const {
  if (choices.empty()) return fmt::format("an integer in {}..{}", min, max);
  std::string s;
  for (auto c : choices) s += (s.empty() ? "" : " | ") + std::string(c);
  return s;
}

Knob tp_channels_knob(std::vector<int> searched, bool (*applies)(const Plan&)) {
  return Knob{.key = "tp_channels",
              .flag = "--tp-channels",
              .help = "NCCL channels (one SM each) of the tensor-parallel communicator: ncclConfig_t minCTAs = maxCTAs, "
                      "Megatron-LM's --nccl-communicator-config-path tp: {min_ctas, max_ctas} (default 0: NCCL's choice)",
              .min = 0,
              .max = 64,  // NCCL's MAXCHANNELS (src/include/device.h)
              .neutral = 0,
              .default_value = 0,
              .searched = std::move(searched),
              .get = [](const Plan& p) { return p.tp_channels; },
              .set = [](Plan& p, int v) { p.tp_channels = v; },
              .get_input = [](const PlanInput& in) { return in.tp_channels; },
              .set_input = [](PlanInput& in, int v) { in.tp_channels = v; },
              .applies = applies};
}

std::optional<std::string> check_tp_channels(const hardware::ClusterSpec& c, const Plan& p) {
  if (p.tp_channels == 0) return std::nullopt;
  if (p.tp == 1) return fmt::format("tp_channels={}: tp=1 has no tensor-parallel communicator", p.tp_channels);
  if (p.grid_tp())
    return fmt::format("tp_channels={}: a {} grid has row and column communicators, not the 1D tensor-parallel one tp_channels sets",
                       p.tp_channels, to_string(p.tp_layout));
  if (c.gpu.arch == hardware::GpuArch::cpu)
    return fmt::format("tp_channels={}: the CPU backend's MPI collectives have no NCCL channels (use 0)", p.tp_channels);
  if (p.tp_channels >= c.gpu.sm_count)
    return fmt::format("tp_channels={} leaves no SMs to the GEMMs of {} ({} SMs)", p.tp_channels, c.gpu.name, c.gpu.sm_count);
  return std::nullopt;
}

std::string describe_tp_channels(const Plan& p) { return p.tp_channels > 0 ? fmt::format(" ch{}", p.tp_channels) : std::string(); }

const Knob* Strategy::knob(std::string_view key) const {
  for (const auto& k : knobs)
    if (k.key == key) return &k;
  return nullptr;
}

std::span<const Strategy* const> strategies() { return registry().strategies; }

const Strategy& find_strategy(std::string_view name, const std::string& source, const std::string& key) {
  std::string names;
  for (const Strategy* s : registry().strategies) {
    if (s->name == name) return *s;
    names += (names.empty() ? "" : " | ") + std::string(s->name);
  }
  throw common::ConfigError(source, key, fmt::format("expected {}, got '{}'", names, name));
}

void register_strategy(const Strategy& s) {
  for (const Strategy* o : registry().strategies)
    if (o->name == s.name) throw std::invalid_argument(fmt::format("register_strategy: a strategy named '{}' exists", s.name));
  registry().add(s);
}

const Strategy& default_strategy() { return strategy_none(); }

std::span<const Knob* const> plan_knobs() { return registry().knobs; }

std::span<const Knob* const> own_knobs(const Strategy& s) {
  const auto& r = registry();
  for (std::size_t i = 0; i < r.strategies.size(); ++i)
    if (r.strategies[i] == &s) return r.own[i];
  throw std::logic_error(fmt::format("strategy '{}' is not registered (sim::register_strategy)", s.name));
}

}  // namespace sim
