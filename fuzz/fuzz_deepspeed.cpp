// Fuzz target: DeepSpeed config JSON files (bridge::parse_deepspeed_config, what --deepspeed-config
// reads), resolved against tiny on cpu-host.
#include "bridge/deepspeed_config.hpp"
#include "bridge/imported_plan.hpp"
#include "fuzz/fuzz_common.hpp"
#include "sim/target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::guard([&] {
    const bridge::ImportedPlan imp = bridge::parse_deepspeed_config(fuzz::text(data, size), "fuzz-ds.json");
    sim::TargetInput in;
    in.model = "tiny";
    in.cluster = "cpu-host";
    (void)bridge::resolve_imported(imp, in, true);
  });
  return 0;
}
