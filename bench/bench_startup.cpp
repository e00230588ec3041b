// bench_startup: whole-process wall time and peak RSS of the slicetune program, as a user runs it
// (start-up, dynamic loading, the command, exit). Each case runs `--runs` times (default 30) after
// 3 warm-up runs; prints min / median / max wall time, the median user + system CPU time, the
// median peak RSS and the median count of page faults (wait4's rusage: on this kind of VM a fault
// costs 12-30 us, so the count explains much of a start-up's time; docs/benchmarks.md).
//   build/bench_startup [--runs N] [--binary PATH] [--against PATH]
// --against: a second program (another build) run alternately with the first, case by case and run
// by run, the order reversed every run, so that both see the same machine: this VM's speed drifts
// by 10-30 % within minutes, and the two programs' rows are comparable only when interleaved.
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
  double faults = 0;  ///< minor + major page faults of the process
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
  s.faults = static_cast<double>(ru.ru_minflt + ru.ru_majflt);
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
  std::string binary = SLICETUNE_BINARY, against;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc || (a != "--runs" && a != "--binary" && a != "--against")) {
      std::fprintf(stderr, "bench_startup: unknown or incomplete flag '%s' (expected --runs N, --binary PATH, --against PATH)\n", a.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (a == "--runs") {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 100000) {
        std::fprintf(stderr, "bench_startup: --runs expects an integer in [1, 100000], got '%s'\n", v.c_str());
        return 2;
      }
      runs = static_cast<int>(n);
    } else if (a == "--binary") {
      binary = v;
    } else {
      against = v;
    }
  }
  for (const std::string& b : {binary, against})
    if (!b.empty() && access(b.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "bench_startup: '%s' is not an executable program\n", b.c_str());
      return 2;
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
  std::vector<std::string> programs{binary};
  if (!against.empty()) programs.push_back(against);
  std::printf("bench_startup: %s%s%s, %d runs per case (after 3 warm-up runs)\n\n", binary.c_str(),
              against.empty() ? "" : " (A) against ", against.empty() ? "" : (against + " (B), interleaved").c_str(), runs);
  std::printf("%-30s %9s %9s %9s %9s %11s %9s %7s\n", "command", "wall min", "median", "mean", "max", "CPU median", "peak RSS", "faults");
  std::printf("%-30s %9s %9s %9s %9s %11s %9s %7s\n", "", "ms", "ms", "ms", "ms", "ms", "MiB", "median");
  for (const auto& c : cases) {
    for (int w = 0; w < 3; ++w)
      for (const auto& b : programs) run_once(b, c.args);
    std::vector<std::vector<double>> ms(programs.size()), cpu(programs.size()), rss(programs.size()), faults(programs.size());
    for (int r = 0; r < runs; ++r)
      for (std::size_t k = 0; k < programs.size(); ++k) {
        const std::size_t j = r % 2 ? programs.size() - 1 - k : k;  // A B, then B A, ...
        const Sample s = run_once(programs[j], c.args);
        if (!WIFEXITED(s.status) || WEXITSTATUS(s.status) != 0) {
          std::fprintf(stderr, "bench_startup: %s exited with status %d (%s)\n", c.name, s.status, programs[j].c_str());
          return 1;
        }
        ms[j].push_back(s.ms);
        cpu[j].push_back(s.cpu_ms);
        rss[j].push_back(s.rss_mb);
        faults[j].push_back(s.faults);
      }
    for (std::size_t j = 0; j < programs.size(); ++j) {
      const std::string name = std::string(c.name) + (programs.size() > 1 ? (j == 0 ? " (A)" : " (B)") : "");
      double sum = 0;
      for (double x : ms[j]) sum += x;
      std::printf("%-30s %9.2f %9.2f %9.2f %9.2f %11.2f %9.1f %7.0f\n", name.c_str(), *std::min_element(ms[j].begin(), ms[j].end()),
                  median(ms[j]), sum / static_cast<double>(ms[j].size()), *std::max_element(ms[j].begin(), ms[j].end()), median(cpu[j]),
                  median(rss[j]), median(faults[j]));
    }
  }
  return 0;
}
