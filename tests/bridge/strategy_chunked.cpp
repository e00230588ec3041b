// A toy strategy for the bridge tests, registered from outside sim/ and bridge/ as a plug-in is:
// Domino's schedule over column chunks only (one row slice), with framework arguments that no real
// framework has. It exercises what the built-in strategies do not: a strategy a framework selects by
// an argument, a knob carried by an argument (Megatron-LM style and NeMo style), and a framework
// with no declaration at all (DeepSpeed-Domino), which export, import and check must say, not drop.
#include "bridge/strategy_support.hpp"
#include "sim/builder.hpp"

namespace test {

const sim::Strategy& strategy_chunked() {
  static const sim::Strategy s{
      .name = "chunked",
      .description = "toy: out-proj / FC2 in column chunks whose collectives overlap the next chunk (no row slices)",
      .knobs = {sim::Knob{.key = "col_slices",
                          .flag = "--col-slices",
                          .help = "column chunks",
                          .min = 1,
                          .max = 8,
                          .neutral = 1,
                          .default_value = 2,
                          .searched = {1, 2, 4},
                          .refused_as = sim::Infeasibility::col_slices,
                          .get = [](const sim::Plan& p) { return p.col_slices; },
                          .set = [](sim::Plan& p, int v) { p.col_slices = v; },
                          .get_input = [](const sim::PlanInput& in) { return in.col_slices; },
                          .set_input = [](sim::PlanInput& in, int v) { in.col_slices = v; }}},
      .baseline = false,
      .searched = false,
      .describe = [](const sim::Plan& p) { return "chunked " + std::to_string(p.col_slices); },
      .schedule = [](sim::Builder& b) { sim::strategy_domino().schedule(b); },
  };
  return s;
}

const bridge::StrategySupport& support_chunked() {
  static const bridge::StrategySupport s{
      .strategy = "chunked",
      .frameworks =
          {
              {.framework = bridge::Framework::megatron,
               .runs = true,
               .selected_by = {"--toy-chunked-overlap"},
               .knobs = {{.key = "col_slices", .arg = "--toy-col-chunks", .why = "chunks of out-proj / FC2", .source = "toy"}}},
              {.framework = bridge::Framework::nemo,
               .runs = true,
               .selected_by = {"model.toy_chunked=True"},
               .knobs =
                   {{.key = "col_slices", .arg = "model.toy_col_chunks", .why = "chunks of out-proj / FC2", .source = "toy"}}},
              // DeepSpeed-Domino: deliberately not declared
          },
  };
  return s;
}

// Registered before any test runs, so that every bridge test sees a third strategy.
const bool registered = (sim::register_strategy(strategy_chunked()), bridge::register_support(support_chunked()), true);

}  // namespace test
