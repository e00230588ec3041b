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

#if defined(SLICETUNE_HAVE_CUDA_BACKEND) && defined(SLICETUNE_BINARY)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

TEST_CASE("slicetune run --backend cuda without a GPU: one line, non-zero exit") {
  // Expected on a machine without a GPU (this CI): exit status 1 (std::runtime_error, cli/main.cpp)
  // and exactly one stderr line "slicetune: error: no CUDA device: ...". On a GPU machine the
  // same command trains one step and exits 0; the case then checks that instead.
  // The launcher of that one rank is the environment variable SLICETUNE_TEST_LAUNCH, a shell command
  // prefix set by whoever runs the tests (default "mpirun --allow-run-as-root --oversubscribe -np 1";
  // set and empty: the binary runs directly, as an MPI singleton). A machine whose mpirun belongs to
  // another MPI than the one slicetune was built with (scripts/gpu_check.sh on a GPU host without the
  // project's packages) sets it empty, as gpu_check.sh does from its LAUNCH.
  const char* launch_env = std::getenv("SLICETUNE_TEST_LAUNCH");
  const std::string launch = launch_env ? launch_env : "mpirun --allow-run-as-root --oversubscribe -np 1";
  CAPTURE(launch);
  const std::string err = "test_cuda_run_nogpu.err";
  const std::string cmd = "timeout 120 " + launch + (launch.empty() ? "" : " ") + SLICETUNE_BINARY +
                          " run --backend cuda --model tiny --cluster dgx-h200 --dtype fp32 --steps 1 --quiet > /dev/null 2> " + err;
  const int rc = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  bool gpu = true;
  try {
    executor::cuda::require_cuda_devices();
  } catch (const std::runtime_error&) {
    gpu = false;
  }
  CAPTURE(text);
  if (gpu) {
    CHECK(rc == 0);
  } else {
    CHECK(rc != 0);
    const std::string line = "slicetune: error: no CUDA device: ";
    const auto at = text.find(line);
    REQUIRE(at != std::string::npos);
    // one line: the message ends at the first newline, and nothing but mpirun's own notice follows
    const auto eol = text.find('\n', at);
    CHECK(eol != std::string::npos);
    CHECK(text.find("no CUDA device", eol) == std::string::npos);
  }
}
#endif
