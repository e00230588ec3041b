// Fuzz target: the command line. The input is argv (arguments separated by NUL bytes) for the
// `simulate`, `collective` and `list` commands, run in-process through cli::run (stdout to
// /dev/null). Flags that write files are dropped, so a fuzzing run leaves nothing behind. The
// one-line errors on stderr are silenced by libFuzzer's -close_fd_mask=2 (scripts/fuzz.sh), which
// keeps libFuzzer's own output and the sanitizers' reports on a copy of stderr; silencing stderr
// here would lose both (the 10-minute run of 2026-12-01 found its log empty).
#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "cli/app.hpp"
#include "fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const int null = ::open("/dev/null", O_WRONLY);
  ::dup2(null, STDOUT_FILENO);  // libFuzzer and the sanitizers write to stderr only
  ::close(null);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"slicetune"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  args.push_back(cur);
  if (args.size() < 2 || args.size() > 40) return 0;
  if (args[1] != "simulate" && args[1] != "collective" && args[1] != "list") return 0;
  for (const auto& a : args)
    for (const char* out : {"--trace", "--dot", "--out", "--csv", "--plot", "--dump-grads", "--help"})
      if (a.rfind(out, 0) == 0 || a.rfind("-h", 0) == 0) return 0;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // 0 or 2 (bad input, a one-line error); 1 means another exception type escaped: a finding
  if (cli::run(static_cast<int>(args.size()), argv.data()) == 1) __builtin_trap();
  return 0;
}
