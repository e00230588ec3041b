// bench_startup: whole-process wall time and peak RSS of the slicetune program, as a user runs it
// (start-up, dynamic loading, the command, exit). Each case runs `--runs` times (default 30) after
// 3 warm-up runs; prints min / median / max wall time, the median user + system CPU time and the
// median peak RSS (wait4's rusage).
//   build/bench_startup [--runs N] [--binary PATH]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Sample {
  double ms = 0;
  double cpu_ms = 0;  ///< user + system CPU time of the process (less sensitive than wall time to other load)
  double rss_mb = 0;
  int status = 0;
};

Sample run_once(const std::string& binary, const std::vector<std::string>& args) {
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, binary.c_str(), &fa, nullptr, cargv.data(), environ) != 0) {
    std::perror("posix_spawn");
    std::exit(1);
  }
  Sample s;
  rusage ru{};
  wait4(pid, &s.status, 0, &ru);
  s.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  s.rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB -> MiB
  s.cpu_ms = (static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
              static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
  posix_spawn_file_actions_destroy(&fa);
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 30;
  std::string binary = SLICETUNE_BINARY;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--binary") binary = argv[i + 1];
  }
  struct Case {
    const char* name;
    std::vector<std::string> args;
  };
  const std::vector<Case> cases = {
      {"--help", {"--help"}},
      {"list", {"list"}},
      {"simulate (default plan)", {"simulate"}},
      {"simulate --json", {"simulate", "--json"}},
      {"collective", {"collective"}},
      {"tune (default)", {"tune"}},
      {"tune --threads 1", {"tune", "--threads", "1"}},
  };
  std::printf("bench_startup: %s, %d runs per case (after 3 warm-up runs)\n\n", binary.c_str(), runs);
  std::printf("%-26s %9s %9s %9s %11s %9s\n", "command", "wall min", "median", "max", "CPU median", "peak RSS");
  std::printf("%-26s %9s %9s %9s %11s %9s\n", "", "ms", "ms", "ms", "ms", "MiB");
  for (const auto& c : cases) {
    for (int w = 0; w < 3; ++w) run_once(binary, c.args);
    std::vector<double> ms, cpu, rss;
    for (int r = 0; r < runs; ++r) {
      const Sample s = run_once(binary, c.args);
      if (!WIFEXITED(s.status) || WEXITSTATUS(s.status) != 0) {
        std::fprintf(stderr, "bench_startup: %s exited with status %d\n", c.name, s.status);
        return 1;
      }
      ms.push_back(s.ms);
      cpu.push_back(s.cpu_ms);
      rss.push_back(s.rss_mb);
    }
    std::printf("%-26s %9.2f %9.2f %9.2f %11.2f %9.1f\n", c.name, *std::min_element(ms.begin(), ms.end()), median(ms),
                *std::max_element(ms.begin(), ms.end()), median(cpu), median(rss));
  }
  return 0;
}
