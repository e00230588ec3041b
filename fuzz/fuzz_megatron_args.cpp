// Fuzz target: Megatron-LM / torchrun command lines (bridge::parse_megatron_args, what
// --megatron-args and --megatron-args-file read), resolved against tiny on cpu-host when complete.
#include "bridge/imported_plan.hpp"
#include "bridge/megatron_args.hpp"
#include "fuzz/fuzz_common.hpp"
#include "sim/target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::guard([&] {
    const bridge::ImportedPlan imp = bridge::parse_megatron_args(fuzz::text(data, size), "fuzz-args");
    sim::TargetInput in;
    in.model = "tiny";
    in.cluster = "cpu-host";
    (void)bridge::resolve_imported(imp, in, true);
  });
  return 0;
}
