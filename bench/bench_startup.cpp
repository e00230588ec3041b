// bench_startup: whole-process wall time and peak RSS of the slicetune program, as a user runs it
// (start-up, dynamic loading, the command, exit). Each case runs `--runs` times (default 30) after
// 3 warm-up runs; prints min / median / max wall time, the median user + system CPU time, the
// median peak RSS and the median count of page faults (wait4's rusage: on this kind of VM a fault
// costs 12-30 us, so the count explains much of a start-up's time; docs/benchmarks.md).
//   build/bench_startup [--runs N] [--binary PATH] [--against PATH]
// --against: a second program (another build) run alternately with the first, case by case and run
// by run, the order reversed every run, so that both see the same machine: this VM's speed drifts
// by 10-30 % within minutes, and the two programs' rows are comparable only when interleaved.
// Reference rows say how fast the machine was while the other rows were measured (a figure of one
// session is comparable with another's only beside them): first the process floor, /bin/true
// started and waited for as the programs are; last a fixed in-process workload, a random walk over
// 512 KiB (the CPU and its L2 cache, without the DRAM and page-table luck of a larger walk: one over
// 8 MiB took 10 or 28 ms from one minute to the next), timed as many times on each CPU this
// process may use (the first 8), pinned to it: this project's VM has run its two vCPUs at different speeds
// (the walk 5.0 ms on one, 7.0-9.1 ms on the other; `tune --threads 1` 50 against 70 ms), and a
// search's threads run on both. The walks run after the programs: their memory would count in
// the programs' peak RSS (a child's ru_maxrss starts from the memory of the process it was
// spawned from).
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
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

/// The samples of one row: wall times always; CPU time, peak RSS and faults where a process ran.
struct Series {
  std::vector<double> ms, cpu, rss, faults;
  void add(const Sample& s) {
    ms.push_back(s.ms);
    cpu.push_back(s.cpu_ms);
    rss.push_back(s.rss_mb);
    faults.push_back(s.faults);
  }
};

volatile std::uint64_t walk_sink;  ///< the walk's sum, kept so that the loop is not dropped

/// The fixed workload of the reference row: 2^20 dependent loads along a random cycle through
/// 512 KiB (2^17 indices, made once outside the timing).
double walk_once(const std::vector<std::uint32_t>& next) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint32_t i = 0;
  std::uint64_t sum = 0;
  for (int k = 0; k < (1 << 20); ++k) {
    i = next[i];
    sum += i;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  walk_sink = sum;
  return ms;
}

/// A random cyclic permutation of 2^17 indices (Sattolo's algorithm, fixed seed): one cycle, so the
/// walk visits every index before it repeats.
std::vector<std::uint32_t> random_cycle() {
  const std::uint32_t n = std::uint32_t{1} << 17;
  std::vector<std::uint32_t> perm(n);
  for (std::uint32_t k = 0; k < n; ++k) perm[k] = k;
  std::mt19937 rng(12345);
  for (std::uint32_t k = n - 1; k > 0; --k) std::swap(perm[k], perm[std::uniform_int_distribution<std::uint32_t>(0, k - 1)(rng)]);
  std::vector<std::uint32_t> next(n);
  for (std::uint32_t k = 0; k < n; ++k) next[perm[k]] = perm[(k + 1) % n];
  return next;
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
  // one row; a column without samples (the in-process reference has no process) shows "-"
  auto row = [](const std::string& name, const Series& x) {
    auto cell = [](const std::vector<double>& v, const char* format) {
      char buf[32] = "-";
      if (!v.empty()) std::snprintf(buf, sizeof buf, format, median(v));
      return std::string(buf);
    };
    double sum = 0;
    for (double v : x.ms) sum += v;
    std::printf("%-30s %9.2f %9.2f %9.2f %9.2f %11s %9s %7s\n", name.c_str(), *std::min_element(x.ms.begin(), x.ms.end()), median(x.ms),
                sum / static_cast<double>(x.ms.size()), *std::max_element(x.ms.begin(), x.ms.end()), cell(x.cpu, "%.2f").c_str(),
                cell(x.rss, "%.1f").c_str(), cell(x.faults, "%.0f").c_str());
  };
  // the references (see the top of this file)
  if (access("/bin/true", X_OK) == 0) {
    for (int w = 0; w < 3; ++w) run_once("/bin/true", {});
    Series x;
    for (int r = 0; r < runs; ++r) x.add(run_once("/bin/true", {}));
    row("reference: /bin/true", x);
  }
  for (const auto& c : cases) {
    for (int w = 0; w < 3; ++w)
      for (const auto& b : programs) run_once(b, c.args);
    std::vector<Series> x(programs.size());
    for (int r = 0; r < runs; ++r)
      for (std::size_t k = 0; k < programs.size(); ++k) {
        const std::size_t j = r % 2 ? programs.size() - 1 - k : k;  // A B, then B A, ...
        const Sample s = run_once(programs[j], c.args);
        if (!WIFEXITED(s.status) || WEXITSTATUS(s.status) != 0) {
          std::fprintf(stderr, "bench_startup: %s exited with status %d (%s)\n", c.name, s.status, programs[j].c_str());
          return 1;
        }
        x[j].add(s);
      }
    for (std::size_t j = 0; j < programs.size(); ++j) row(std::string(c.name) + (programs.size() > 1 ? (j == 0 ? " (A)" : " (B)") : ""), x[j]);
  }
  {
    const std::vector<std::uint32_t> next = random_cycle();
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    const bool pin = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
    // on each CPU up to kMaxWalkCpus of them (a row each; a large machine's rows would bury the rest)
    constexpr int kMaxWalkCpus = 8;
    int walked = 0;
    for (int cpu = 0; cpu < (pin ? CPU_SETSIZE : 1) && walked < kMaxWalkCpus; ++cpu) {
      if (pin && !CPU_ISSET(cpu, &allowed)) continue;
      ++walked;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      const bool pinned = pin && sched_setaffinity(0, sizeof one, &one) == 0;
      for (int w = 0; w < 3; ++w) walk_once(next);
      Series x;  // wall times only: no process ran
      for (int r = 0; r < runs; ++r) x.ms.push_back(walk_once(next));
      row(pinned ? "reference: 512 KiB walk, CPU " + std::to_string(cpu) : std::string("reference: 512 KiB walk"), x);
      if (!pinned) break;
    }
    if (pin) {
      sched_setaffinity(0, sizeof allowed, &allowed);
      if (CPU_COUNT(&allowed) > kMaxWalkCpus) std::printf("(the walk on the first %d of %d CPUs)\n", kMaxWalkCpus, CPU_COUNT(&allowed));
    }
  }
  return 0;
}
