// The CUDA backend on a machine without a GPU: refuses in one line instead of failing later.
#include <doctest/doctest.h>

#ifdef SLICETUNE_HAVE_CUDA_BACKEND
#include <stdexcept>
#include <string>

#include "executor/cuda/device.hpp"

TEST_CASE("require_cuda_devices: a count, or one line starting 'no CUDA device: '") {
  // Expected (CUDA runtime contract): cudaGetDeviceCount fails (no driver) or returns 0 on a
  // machine without a GPU -> our error; on a GPU machine it returns >= 1.
  try {
    const int n = executor::cuda::require_cuda_devices();
    CHECK(n >= 1);
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    CHECK(m.rfind("no CUDA device: ", 0) == 0);
    CHECK(m.find('\n') == std::string::npos);
    CHECK(m.find("--backend cpu") != std::string::npos);  // says what to do instead
  }
}
#endif
