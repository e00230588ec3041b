// defines: hardening tests' process helpers: run (a program with exact arguments, no shell, with a
//          time limit), Launched (a background program), descendants, rank_pid, Scratch (a temp folder)
#pragma once
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/config_error.hpp"

namespace hardening {

/// The message of the common::ConfigError `f` throws ("" if it throws none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "";
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

/// A fresh folder under the temp dir, removed at the end of the test.
struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    std::string t = (std::filesystem::temp_directory_path() / "slicetune-hardening-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    dir = t;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

/// A program started in the background with stdout / stderr to files.
struct Launched {
  pid_t pid = -1;
  std::string out_path, err_path;
  std::chrono::steady_clock::time_point start;
  int status = 0;
  bool ended = false;

  Launched(const std::vector<std::string>& argv, const std::string& log_prefix) {
    out_path = log_prefix + ".out";
    err_path = log_prefix + ".err";
    start = std::chrono::steady_clock::now();
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setpgid(0, 0);  // its own process group: the test can end it and all it started
      const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }
  /// Waits up to `limit_s`; true if it ended (status in `status`).
  bool wait(double limit_s) {
    if (ended) return true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    for (;;) {
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        ended = true;
        return true;
      }
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }
  std::string out() const { return slurp(out_path); }
  std::string err() const { return slurp(err_path); }
  /// Ends the whole process group (what is left of it) with SIGKILL.
  void kill_all() {
    ::kill(-pid, SIGCONT);
    ::kill(-pid, SIGKILL);
    wait(10);
  }
  ~Launched() {
    if (!ended) kill_all();
  }
};

struct Result {
  int code = 0;  ///< exit status; negative: killed by that signal; -1000: over the time limit
  std::string out, err;
  double seconds = 0;
};

/// Runs `argv` (argv[0] looked up in PATH) with exact arguments: no shell, so quotes, spaces and
/// newlines reach the program as they are. Killed after `limit_s`.
inline Result run(const std::vector<std::string>& argv, double limit_s = 60) {
  static int counter = 0;
  const std::string prefix = (std::filesystem::temp_directory_path() / ("slicetune-hardening-run-" + std::to_string(::getpid()) + "-" +
                                                                         std::to_string(counter++)))
                                 .string();
  Result r;
  {
    Launched p(argv, prefix);
    const bool done = p.wait(limit_s);
    if (!done) p.kill_all();
    r.seconds = p.seconds();
    r.code = done ? p.exit_code() : -1000;
    r.out = p.out();
    r.err = p.err();
  }
  std::filesystem::remove(prefix + ".out");
  std::filesystem::remove(prefix + ".err");
  return r;
}

/// The slicetune program under test: the build's, or $SLICETUNE_TEST_BINARY (to show that a test
/// fails with another build, e.g. the one before a fix).
inline std::string binary() {
  const char* other = std::getenv("SLICETUNE_TEST_BINARY");
  return other && *other ? other : SLICETUNE_BINARY;
}

/// `slicetune ARGS...`
inline Result slicetune(std::vector<std::string> args, double limit_s = 60) {
  args.insert(args.begin(), binary());
  return run(args, limit_s);
}

/// `mpirun -np N slicetune ARGS...` (as root: --allow-run-as-root; --oversubscribe for N > cores).
inline std::vector<std::string> mpirun_argv(int np, const std::vector<std::string>& args) {
  std::vector<std::string> v{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(np), binary()};
  v.insert(v.end(), args.begin(), args.end());
  return v;
}

/// Lines of `s` that contain `needle`.
inline int count_lines_with(const std::string& s, const std::string& needle) {
  int n = 0;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

inline int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

/// Parent pid of `pid` from /proc (-1 if gone).
inline pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  char state;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

/// True if `pid` exists and is not a zombie.
inline bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

/// The pid of the slicetune process of MPI rank `rank` started (through mpirun) by `root`, or -1.
inline pid_t rank_pid(pid_t root, int rank) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    bool under = false;
    for (pid_t p = pid; p > 1; p = parent_of(p))
      if (p == root) {
        under = true;
        break;
      }
    if (!under || pid == root) continue;
    const std::string cmd = slurp("/proc/" + name + "/cmdline");
    if (cmd.find("slicetune") == std::string::npos || cmd.find("mpirun") != std::string::npos) continue;
    const std::string env = slurp("/proc/" + name + "/environ");
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos) return pid;
  }
  return -1;
}

}  // namespace hardening
