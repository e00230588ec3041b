// common/process_exit.hpp: the program's exit without its teardown where nothing needs it.
// Expected values come from the rules in that header: the teardown is skipped only when
// note_loaded_objects was called, no shared object was loaded since and the build has no
// sanitizer; output is flushed either way; the exit code is the one given.
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "common/process_exit.hpp"

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
