// Start-up: simulate, tune, list and --help never load the CUDA libraries (the CUDA backend is a
// plug-in loaded only by CUDA commands). Meaningful in a CUDA build; a CPU-only build passes trivially.
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/hardening/process.hpp"

using namespace hardening;

namespace {

bool mentions_cuda(const std::string& s) {
  for (const char* lib : {"libcublas", "libnccl", "libcudart", "libcuda.so"})
    if (s.find(lib) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("the slicetune program does not link the CUDA libraries") {
  // ldd lists every library the loader maps at start-up (direct and indirect)
  const auto r = run({"ldd", binary()});
  REQUIRE(r.code == 0);
  CHECK_FALSE(mentions_cuda(r.out));
}

TEST_CASE("simulate, tune, list and --help load no CUDA library, not even through dlopen") {
  // LD_DEBUG=libs makes the loader print every library it searches for or loads, dlopen included
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"list"}, {"simulate"}, {"tune", "--no-explain"}, {"collective"}}) {
    std::vector<std::string> argv{"env", "LD_DEBUG=libs", binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run(argv);
    CAPTURE(args[0]);
    CHECK(r.code == 0);
    CHECK(r.err.find("calling init") != std::string::npos);  // LD_DEBUG took effect
    CHECK_FALSE(mentions_cuda(r.err));
  }
}
