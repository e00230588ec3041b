// common/process_exit.hpp: the program's exit without its teardown where nothing needs it, and
// tuner::stop_threads (the search's threads ended before the exit). Expected values come from the
// rules in those headers: the teardown is skipped only when note_loaded_objects was called, no
// shared object was loaded since and the build has no sanitizer; output is flushed either way; the
// exit code is the one given; after stop_threads the pool's threads end and parallel_for still
// runs every item once.
#include <doctest/doctest.h>

#include <dirent.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "common/process_exit.hpp"
#include "tuner/search.hpp"

namespace {

constexpr bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(leak_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

/// What a child process writes to its stdout before end_process(code) (`load`: it dlopens libz
/// first), and its exit status: the child prints through std::cout and stdio (both buffered into the
/// pipe), registers an atexit handler that writes "atexit", then ends.
struct Child {
  std::string out;
  int status = -1;
};
Child run_child(int code, bool load) {
  int fd[2];
  REQUIRE(pipe(fd) == 0);
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    common::note_loaded_objects();
    if (load && !dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL)) ::_exit(99);
    std::atexit([] {
      std::fputs("atexit", stdout);
      std::fflush(stdout);
    });
    std::cout << "from cout, no newline";
    std::printf(" | from stdio");
    common::end_process(code);
  }
  close(fd[1]);
  Child c;
  char buf[256];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) c.out.append(buf, static_cast<std::size_t>(n));
  close(fd[0]);
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  c.status = st;
  return c;
}

/// this process's threads (/proc/self/task)
int threads_now() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("end_process flushes stdout, exits with the code, and skips the exit handlers only where nothing was loaded since the start") {
  // libz is on every Debian system (a dependency of the toolchain); the test process must not have it yet
  REQUIRE(dlopen("libz.so.1", RTLD_NOW | RTLD_NOLOAD) == nullptr);
  const Child fast = run_child(7, false);
  REQUIRE(WIFEXITED(fast.status));
  CHECK(WEXITSTATUS(fast.status) == 7);
  // without a sanitizer the atexit handler is skipped (_exit); with one, std::exit runs it
  CHECK(fast.out == std::string("from cout, no newline | from stdio") + (sanitized() ? "atexit" : ""));

  const Child loaded = run_child(3, true);
  REQUIRE(WIFEXITED(loaded.status));
  CHECK(WEXITSTATUS(loaded.status) == 3);
  CHECK(loaded.out == "from cout, no newline | from stdioatexit");  // a library loaded since the start: a normal exit
}

TEST_CASE("fast_exit_allowed: only after note_loaded_objects, in a build without sanitizers, while no object has been loaded since") {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    // the test program never calls note_loaded_objects itself: not allowed before
    if (common::fast_exit_allowed()) bad |= 1;
    common::note_loaded_objects();
    if (common::fast_exit_allowed() != !sanitized()) bad |= 2;
    if (!dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL)) bad |= 4;
    if (common::fast_exit_allowed()) bad |= 8;
    ::_exit(bad);
  }
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);  // each failed rule sets its own bit
}

// Run only as the child of the next test, a fresh process (its filter names it; without the
// variable it returns at once): a forked child would inherit a pool whose threads it does not have.
TEST_CASE("stop_threads child") {
  if (!std::getenv("SLICETUNE_STOP_THREADS_CHILD")) return;
  std::vector<std::atomic<int>> seen(1000);
  tuner::parallel_for(seen.size(), 2, [&](std::size_t i) { seen[i].fetch_add(1); });  // starts the pool's helper
  for (auto& s : seen) REQUIRE(s.load() == 1);
  const int with_pool = threads_now();
  REQUIRE(with_pool == 2);  // this thread and the helper
  tuner::stop_threads();
  // the helper returns as it sees the stop (awake in its spin, or woken): within microseconds here
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (threads_now() > 1 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(threads_now() == 1);
  for (auto& s : seen) s.store(0);
  tuner::parallel_for(seen.size(), 2, [&](std::size_t i) { seen[i].fetch_add(1); });  // threads of its own now
  for (auto& s : seen) CHECK(s.load() == 1);
  CHECK(threads_now() == 1);  // and they were joined
}

TEST_CASE("stop_threads ends the pool's threads; parallel_for still runs every item once after it") {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("SLICETUNE_STOP_THREADS_CHILD", "1", 1);
    execl("/proc/self/exe", "test_hardening", "--test-case=stop_threads child", "--no-version", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);  // doctest's status: 0 when every check of the child passed
}
