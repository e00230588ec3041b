// common/process_exit.hpp: the program's exit without its teardown where nothing needs it.
// Expected values come from the rules in that header: the teardown is skipped only when
// note_loaded_objects was called, no shared object was loaded since and the build has no
// sanitizer; output is flushed either way; the exit code is the one given. Each case runs in a
// fresh process - this test program started again with its test filter naming the child case and
// SLICETUNE_EXIT_CHILD saying what to do (without the variable the child case returns at once) -
// not in a fork of this one, whose other threads' memory a sanitizer's exit check would not see.
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
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

/// A shared library on this system that the process has not loaded: the first of a few that every
/// Debian system with this project's packages has (zlib, xz, bzip2, libffi, expat - some builds
/// link one or another: the sanitizer build's runtime brings zlib), else null.
const char* unloaded_library() {
  for (const char* name : {"libz.so.1", "liblzma.so.5", "libbz2.so.1.0", "libffi.so.8", "libexpat.so.1"}) {
    if (dlopen(name, RTLD_NOW | RTLD_NOLOAD)) continue;  // loaded already
    for (const char* dir : {"/lib/x86_64-linux-gnu/", "/usr/lib/x86_64-linux-gnu/", "/lib/aarch64-linux-gnu/", "/usr/lib/aarch64-linux-gnu/",
                            "/lib64/", "/usr/lib64/", "/lib/", "/usr/lib/"})
      if (access((std::string(dir) + name).c_str(), R_OK) == 0) return name;
  }
  return nullptr;
}

struct Child {
  std::string out;  ///< what it wrote to stdout
  int status = -1;  ///< waitpid's
};

/// This program again, running only the case "process exit child" with SLICETUNE_EXIT_CHILD=`what`.
Child run_child(const char* what) {
  // the child checks how a process ends, not leaks: LeakSanitizer's check at its exit (which would
  // answer with an exit code of its own) is left to this program's own exit
  const char* was = std::getenv("ASAN_OPTIONS");
  const std::string asan_options = std::string(was ? was : "") + (was && *was ? ":" : "") + "detect_leaks=0";
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
    setenv("SLICETUNE_EXIT_CHILD", what, 1);
    if (sanitized()) setenv("ASAN_OPTIONS", asan_options.c_str(), 1);
    execl("/proc/self/exe", "test_hardening", "--test-case=process exit child", "--no-intro", static_cast<char*>(nullptr));
    ::_exit(127);
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

TEST_CASE("process exit child") {
  const char* what = std::getenv("SLICETUNE_EXIT_CHILD");
  if (!what) return;  // only as the child of the cases below
  if (std::strcmp(what, "rules") == 0) {
    // fast_exit_allowed's rules; each one broken sets its own bit of the exit code
    int bad = 0;
    if (common::fast_exit_allowed()) bad |= 1;  // note_loaded_objects not called yet
    common::note_loaded_objects();
    if (common::fast_exit_allowed() != !sanitized()) bad |= 2;
    const char* lib = unloaded_library();
    if (!lib) bad |= 4;  // no library to load: the next check would prove nothing
    else if (!dlopen(lib, RTLD_NOW | RTLD_LOCAL)) bad |= 8;
    if (common::fast_exit_allowed()) bad |= 16;
    ::_exit(bad);
  }
  // "fast" or "load": buffered output through std::cout and stdio, an atexit handler, end_process
  common::note_loaded_objects();
  if (std::strcmp(what, "load") == 0) {
    const char* lib = unloaded_library();
    if (!lib || !dlopen(lib, RTLD_NOW | RTLD_LOCAL)) ::_exit(99);
  }
  std::atexit([] {
    std::fputs(" | atexit", stdout);
    std::fflush(stdout);
  });
  std::cout << "from cout, no newline";
  std::printf(" | from stdio");
  common::end_process(std::strcmp(what, "load") == 0 ? 3 : 7);
}

TEST_CASE("end_process flushes stdout and exits with the code; it skips the exit handlers only where nothing was loaded since the start") {
  const Child fast = run_child("fast");
  REQUIRE(WIFEXITED(fast.status));
  CHECK(WEXITSTATUS(fast.status) == 7);
  // without a sanitizer the atexit handler is skipped (_exit); with one, std::exit runs it
  CHECK(fast.out == std::string("from cout, no newline | from stdio") + (sanitized() ? " | atexit" : ""));

  const Child loaded = run_child("load");
  REQUIRE(WIFEXITED(loaded.status));
  CHECK(WEXITSTATUS(loaded.status) == 3);
  CHECK(loaded.out == "from cout, no newline | from stdio | atexit");  // a library loaded since the start: a normal exit
}

TEST_CASE("fast_exit_allowed: only after note_loaded_objects, in a build without sanitizers, while no object has been loaded since") {
  const Child c = run_child("rules");
  REQUIRE(WIFEXITED(c.status));
  CHECK(WEXITSTATUS(c.status) == 0);  // each failed rule sets its own bit
}
