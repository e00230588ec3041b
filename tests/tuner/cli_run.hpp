// The slicetune program run as a user runs it, for the tuner suite's CLI tests.
#pragma once
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tuner_test {

struct Run {
  int rc;
  std::string out;
};

/// `slicetune ARGS`; `out` is its stdout, with stderr appended when `with_stderr`.
inline Run run_slicetune(const std::string& args, bool with_stderr = false) {
  const std::string cmd = std::string(SLICETUNE_BINARY) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace tuner_test
