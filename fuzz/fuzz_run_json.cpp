// Fuzz target: run JSON (validate::parse_run_json, what `validate --measured` reads).
#include "fuzz/fuzz_common.hpp"
#include "validate/compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::guard([&] { (void)validate::parse_run_json(fuzz::text(data, size), "fuzz-run.json"); });
  return 0;
}
