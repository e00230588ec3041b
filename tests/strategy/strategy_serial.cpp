// A toy third strategy, added from outside sim/ as a plug-in is (docs/strategies.md walks through
// it): Megatron-LM's schedule with every collective issued on the compute stream, so that nothing
// overlaps anything - not even the data-parallel gradient reduction that strategy none hides
// behind the backward pass. One file; test_strategy_plugin.cpp registers it.
#include "sim/builder.hpp"
#include "sim/strategy.hpp"

namespace test {

const sim::Strategy& strategy_serial() {
  static const sim::Strategy s{
      .name = "serial",
      .description = "Megatron-LM's schedule with every collective on the compute stream: no overlap at all",
      .knobs = {},
      .baseline = false,
      .searched = false,  // a teaching example, not a plan anyone should run
      .describe = [](const sim::Plan&) { return std::string("serial"); },
      .check = [](const sim::ModelSpec&, const hardware::ClusterSpec&, const sim::Plan& p) -> std::optional<std::string> {
        if (p.sequence_parallel) return "sequence parallelism needs its AllGather / ReduceScatter on a communication stream";
        return std::nullopt;
      },
      .schedule =
          [](sim::Builder& b) {
            auto& streams = b.streams();
            streams.tp_comm = streams.dp_comm = streams.compute;  // every collective issued in line with the kernels
            sim::strategy_none().schedule(b);
          },
  };
  return s;
}

}  // namespace test
