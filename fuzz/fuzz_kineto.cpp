// Fuzz target: PyTorch profiler (Kineto) Chrome traces (validate::parse_kineto_trace, what
// validate --measured TRACE.json reads), devices 0 and 1.
#include "fuzz/fuzz_common.hpp"
#include "validate/measured_trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::text(data, size);
  for (int device : {0, 1}) fuzz::guard([&] { (void)validate::parse_kineto_trace(text, "fuzz-trace.json", device); });
  return 0;
}
