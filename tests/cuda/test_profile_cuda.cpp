// The CUDA profiler's element-wise and AdamW measurements on a GPU (skipped without one): every
// kernel of the CUDA executor timed at every size of the grid, positive finite times, and rows in the
// profile. The measurement itself checks each kernel's result against a host computation and throws
// on a mismatch, so a passing case also means the kernels computed the right values.
#include <doctest/doctest.h>

#if defined(SLICETUNE_HAVE_CUDA_BACKEND) && defined(SLICETUNE_PROFILER_CUDA)
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "executor/cuda/device.hpp"
#include "profiler/cuda_profiler.hpp"

TEST_CASE("on a GPU: element-wise rows for every CUDA kernel at every grid size, and AdamW rows, all positive") {
  try {
    executor::cuda::require_cuda_devices();
  } catch (const std::runtime_error& e) {
    MESSAGE("skipped, no GPU: " << std::string(e.what()));
    return;
  }
  profiler::Options o{.backend = "cuda", .quick = true};
  profiler::cuda::Request req = profiler::cuda_request(o);
  req.grid.clear();  // no GEMMs: this case is about the element-wise and AdamW tables
  req.extra.clear();
  std::ostringstream progress;
  req.progress = &progress;
  profiler::init_mpi_if_needed();
  struct FinishMpi {
    ~FinishMpi() { profiler::finish(); }
  } finish_mpi;
  const profiler::cuda::Result r = profiler::cuda::measure(req);
  CAPTURE(progress.str());

  // Expected: one result per requested shape (a small GPU run fits them all), each a positive finite
  // median time; every kernel present at each of the quick grid's 8 sizes (64 .. 2^20 elements).
  REQUIRE(r.elementwise.size() == req.elementwise.size());
  for (const auto& e : r.elementwise) {
    CAPTURE(e.shape.kind);
    CAPTURE(e.shape.elements());
    CHECK(std::isfinite(e.us));
    CHECK(e.us > 0);
  }
  const hardware::Profile p = profiler::cuda_profile(o, req, r);
  for (const auto& k : profiler::cuda::kElementwiseKernels) {
    CAPTURE(k.kind);
    CAPTURE(k.backward);
    int sizes = 0;
    for (const auto& e : p.elementwise) sizes += e.kind == k.kind && e.backward == k.backward && e.us > 0;
    CHECK(sizes == 8);
  }
  // AdamW: 1024 .. 2^20 parameters in x4 steps, 6 sizes, each positive.
  REQUIRE(p.optimizer.size() == 6);
  for (const auto& e : p.optimizer) CHECK(e.us > 0);
}
#endif
