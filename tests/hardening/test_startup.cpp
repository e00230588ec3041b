// Start-up: simulate, tune, list and --help never load the CUDA libraries (the CUDA backend is a
// plug-in loaded only by CUDA commands; meaningful in a CUDA build, a CPU-only build passes
// trivially), nor OpenBLAS (loaded with dlopen by the CPU backend and the profiler only), nor Open
// MPI (the executor's and profiler's MPI half is the plug-in libslicetune_mpi.so, loaded only by
// commands that need MPI).
#include <doctest/doctest.h>


#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/memory_reuse.hpp"
#include "common/plugin_error.hpp"
#include "common/threads.hpp"

#include "tests/hardening/process.hpp"

using namespace hardening;

namespace {

bool mentions_cuda(const std::string& s) {
  for (const char* lib : {"libcublas", "libnccl", "libcudart", "libcuda.so"})
    if (s.find(lib) != std::string::npos) return true;
  return false;
}

bool mentions_openblas(const std::string& s) { return s.find("libopenblas") != std::string::npos; }

// libmpi.so.40 (Open MPI) or libmpich; libslicetune_mpi.so (the plug-in) does not contain "libmpi"
bool mentions_mpi(const std::string& s) { return s.find("libmpi") != std::string::npos; }

}  // namespace

TEST_CASE("the slicetune program does not link the CUDA libraries") {
  // ldd lists every library the loader maps at start-up (direct and indirect)
  const auto r = run({"ldd", binary()});
  REQUIRE(r.code == 0);
  CHECK_FALSE(mentions_cuda(r.out));
#ifdef SLICETUNE_HAVE_EXECUTOR
  // OpenBLAS (~16,000 relocations, a third of simulate's start-up instructions) is not linked either
  CHECK_FALSE(mentions_openblas(r.out));
  // nor Open MPI (libmpi, open-rte, open-pal, hwloc, libevent: 3-4 M of simulate's instructions)
  CHECK_FALSE(mentions_mpi(r.out));
  CHECK(r.out.find("libopen-pal") == std::string::npos);
#endif
  // nor SQLite (validate/measured_trace.cpp loads it with dlopen for Nsight Systems exports; the
  // control is tests/bridge/test_measured_trace.cpp's `validate --measured ....sqlite`)
  CHECK(r.out.find("libsqlite3") == std::string::npos);
}

TEST_CASE("simulate, tune, list and --help load no CUDA library, OpenBLAS or MPI, not even through dlopen") {
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
    CHECK_FALSE(mentions_openblas(r.err));
    CHECK_FALSE(mentions_mpi(r.err));
    CHECK(r.err.find("libslicetune_mpi") == std::string::npos);
    CHECK(r.err.find("libsqlite3") == std::string::npos);
  }
  // and every command's --help (they are declared without MPI)
  for (const char* cmd : {"run", "validate", "profile", "tune"}) {
    const auto r = run({"env", "LD_DEBUG=libs", binary(), cmd, "--help"});
    CAPTURE(cmd);
    CHECK(r.code == 0);
    CHECK(r.err.find("calling init") != std::string::npos);
    CHECK_FALSE(mentions_mpi(r.err));
  }
}

#ifdef SLICETUNE_HAVE_EXECUTOR
TEST_CASE("run loads OpenBLAS when the CPU backend starts (the dlopen path works)") {
  // the control for the test above: the same LD_DEBUG trace of a one-step, one-rank run names
  // libopenblas (mpirun itself never loads it), and the run succeeds (its GEMMs went through it)
  Scratch s;
  std::vector<std::string> argv{"env", "LD_DEBUG=libs"};
  for (const auto& a : mpirun_argv(1, {"run", "--model", "tiny", "--steps", "1", "--quiet", "--out", s / "run.json"})) argv.push_back(a);
  const auto r = run(argv, 120);
  CHECK(r.code == 0);
  CHECK(mentions_openblas(r.err));
  CHECK(std::filesystem::exists(s / "run.json"));
}

TEST_CASE("run and tune under mpirun load the MPI plug-in and Open MPI (the dlopen path works)") {
  // the control for the MPI checks above: under mpirun a run and a two-process tune find and load
  // libslicetune_mpi.so, which maps libmpi; both succeed (test_run and test_distributed check results)
  Scratch s;
  std::vector<std::string> argv{"env", "LD_DEBUG=libs"};
  for (const auto& a : mpirun_argv(1, {"run", "--model", "tiny", "--steps", "1", "--quiet", "--out", s / "run.json"}))
    argv.push_back(a);
  const auto r = run(argv, 120);
  CHECK(r.code == 0);
  CHECK(r.err.find("libslicetune_mpi.so") != std::string::npos);
  CHECK(mentions_mpi(r.err));
  CHECK(std::filesystem::exists(s / "run.json"));

  std::vector<std::string> tune{"env", "LD_DEBUG=libs"};
  for (const auto& a : mpirun_argv(2, {"tune", "--threads", "1", "--no-explain"})) tune.push_back(a);
  const auto t = run(tune, 300);
  CHECK(t.code == 0);
  CHECK(t.err.find("libslicetune_mpi.so") != std::string::npos);
}
#endif

#ifdef SLICETUNE_STATIC_RUNTIME
TEST_CASE("the slicetune program carries its C++ runtime, libyaml and fmt (no start-up binding of their symbols)") {
  // SLICETUNE_STATIC_RUNTIME (CMakeLists.txt): the loader maps only the C library and libm at start-up
  const auto r = run({"ldd", binary()});
  REQUIRE(r.code == 0);
  for (const char* lib : {"libstdc++", "libgcc_s", "libyaml", "libfmt"}) {
    CAPTURE(lib);
    CHECK(r.out.find(lib) == std::string::npos);
  }
  CHECK(r.out.find("libc.so") != std::string::npos);  // the control: ldd listed the libraries
}
#endif

TEST_CASE("an exception in a plug-in comes back as data and is thrown again as the same kind, same message") {
  // common/plugin_error.hpp: the MPI plug-in's entry points catch into a PluginError (the program
  // and the plug-in each have a C++ runtime), the program's side throws it again: a ConfigError as a
  // ConfigError (exit 2), anything else as std::runtime_error (exit 1), with what() unchanged
  auto round_trip = [](auto&& work) {
    common::PluginError e;
    common::catch_into(&e, work);
    return e;
  };
  const auto none = round_trip([] {});
  CHECK(none.kind == common::PluginError::Kind::none);
  CHECK_NOTHROW(common::rethrow_plugin_error(none));
  const auto config = round_trip([] { throw common::ConfigError("plan.yaml", "tp", "expected a positive integer"); });
  CHECK(config.kind == common::PluginError::Kind::config);
  CHECK(error_of([&] { common::rethrow_plugin_error(config); }) == "plan.yaml: tp: expected a positive integer");
  const auto other = round_trip([] { throw std::logic_error("engine deadlock"); });
  CHECK(other.kind == common::PluginError::Kind::other);
  CHECK_THROWS_WITH_AS(common::rethrow_plugin_error(other), "engine deadlock", std::runtime_error);
  CHECK(error_of([&] { try { common::rethrow_plugin_error(other); } catch (const std::runtime_error&) {} }).empty());  // not a ConfigError
  const auto unknown = round_trip([] { throw 42; });
  CHECK(unknown.kind == common::PluginError::Kind::other);
  CHECK(unknown.message == "an exception of unknown type in the MPI plug-in");
}

#ifdef SLICETUNE_HAVE_EXECUTOR
TEST_CASE("bad input found inside the MPI plug-in ends the program with its one-line error and exit code 2") {
  // run --backend cuda: the MPI plug-in makes the backend and throws a ConfigError naming --backend
  // inside the plug-in - with the CUDA plug-in built, because SLICETUNE_CUDA_PLUGIN names no file;
  // without it (SLICETUNE_DISABLE_CUDA, the sanitizer builds), because there is no CUDA backend. The
  // program prints it once as any bad input (cli/app.cpp) and exits 2, as it did when the exception
  // crossed the boundary itself.
  std::vector<std::string> argv{"env", "SLICETUNE_CUDA_PLUGIN=/nonexistent/libslicetune_cuda.so"};
  for (const auto& a : mpirun_argv(1, {"run", "--model", "tiny", "--steps", "1", "--quiet", "--backend", "cuda"})) argv.push_back(a);
  const auto r = run(argv, 120);
  CAPTURE(r.err);
  CHECK(r.code == 2);
#ifdef SLICETUNE_CUDA_PLUGIN
  CHECK(count_lines_with(r.err, "slicetune: error: --backend cuda: cannot load the CUDA backend (/nonexistent/libslicetune_cuda.so)") == 1);
#else
  CHECK(count_lines_with(r.err, "slicetune: error: --backend: cuda: this slicetune was built without the CUDA backend") == 1);
#endif
  CHECK(count_lines_with(r.err, "slicetune: error:") == 1);
}
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLICETUNE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SLICETUNE_TEST_SANITIZED 1
#endif
#endif

namespace {

/// The VmFlags line of the mapping holding `at` (/proc/self/smaps, proc(5)); empty if none does.
[[maybe_unused]] std::string mapping_flags(std::uintptr_t at) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line, flags;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line (the others start with a field name)
      inside = at >= lo && at < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) flags = line;
  }
  return flags;
}

/// A field of the mapping holding `at` in kB, e.g. "Rss:" (/proc/self/smaps); -1 if no mapping does.
[[maybe_unused]] long mapping_kb(std::uintptr_t at, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  long kb = -1;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = at >= lo && at < hi;
      continue;
    }
    if (inside && line.rfind(field, 0) == 0) kb = std::strtol(line.c_str() + field.size(), nullptr, 10);
  }
  return kb;
}

}  // namespace

TEST_CASE("common::keep_until_exit keeps an object alive and never destroys it") {
  // `tune` leaves its search caches to the process's exit (cli/tune.cpp): the reference stays valid
  // after the owner is handed over, and the destructor does not run while the program goes on
  // (nor at exit: the list holding it is never destroyed; LeakSanitizer sees it reachable, so the
  // sanitized runs of this suite pass)
  struct Probe {
    bool* destroyed = nullptr;
    int value = 42;
    ~Probe() {
      if (destroyed) *destroyed = true;
    }
  };
  static bool destroyed = false;
  auto owner = std::make_unique<Probe>();
  owner->destroyed = &destroyed;
  Probe& kept = common::keep_until_exit(std::move(owner));
  CHECK(kept.value == 42);
  kept.value = 7;
  CHECK(kept.value == 7);
  CHECK_FALSE(destroyed);
}

#if !defined(SLICETUNE_TEST_SANITIZED) && defined(__GLIBC__)
namespace {
/// For the test cases that the case below runs as processes of their own with `env` set (a fresh
/// heap or arena): true there; elsewhere it says so and the case passes without checking.
bool in_own_process(const char* env) {
  if (std::getenv(env)) return true;
  MESSAGE("run as a process of its own by the test case above");
  return false;
}
}  // namespace
#endif

TEST_CASE("tune and whatif's heap is advised for transparent huge pages (common::use_huge_pages, use_huge_pages_in_thread)") {
  // use_huge_pages grows the heap by a 64 MB pad and advises it MADV_HUGEPAGE; the kernel shows
  // the advice as "hg" in the mapping's VmFlags (proc(5)). Checked on a block malloc hands out
  // from the pad afterwards. Not meaningful where the kernel has transparent huge pages off, or
  // under a sanitizer (its allocator does not use the heap).
#if defined(SLICETUNE_TEST_SANITIZED) || !defined(__GLIBC__)
  MESSAGE("skipped: a sanitizer's allocator or not glibc");
#else
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    MESSAGE("skipped: transparent huge pages are off on this machine");
    return;
  }
  // the test case `pattern` in a process of its own, with `env` set: it must pass
  auto alone = [](const char* env, const std::string& pattern) {
    ::setenv(env, "1", 1);
    const auto child = hardening::run({"/proc/self/exe", "--test-case=" + pattern, "--no-version", "--no-intro"});
    ::unsetenv(env);
    CAPTURE(pattern);
    CAPTURE(child.out);
    CAPTURE(child.err);
    CHECK(child.code == 0);
    CHECK(child.out.find("1 passed") != std::string::npos);
  };
  // the heap's pad, advised: in a process of its own, whose heap is as the program's when it calls
  // use_huge_pages (in this one, the tests before may have left a free chunk of 8 MB below the pad)
  alone("SLICETUNE_TEST_FRESH_ADVICE", "a block from the heap's pad is advised for huge pages*");
  // a thread's own arena (glibc gives each thread a heap of its own): in a process of its own,
  // where the thread's arena is new (this one's threads leave arenas that glibc hands out again)
  alone("SLICETUNE_TEST_FRESH_ARENA", "a new thread's arena*");
  // the heap's first allocation after the advice lands on a huge page (a process of its own: a
  // fresh heap, grown by use_huge_pages)
  alone("SLICETUNE_TEST_FRESH_HEAP", "the heap's advised range has no small page*");
  // pages faulted in ahead (common::prefault_heap, use_huge_pages_in_thread's prefault)
  alone("SLICETUNE_TEST_FRESH_PREFAULT", "prefault_heap faults the heap's first advised pages in ahead*");
#endif
}

TEST_CASE("a block from the heap's pad is advised for huge pages (run by the case above in a process of its own)") {
#if defined(SLICETUNE_TEST_SANITIZED) || !defined(__GLIBC__)
  MESSAGE("skipped: a sanitizer's allocator or not glibc");
#else
  if (!in_own_process("SLICETUNE_TEST_FRESH_ADVICE")) return;
  common::keep_freed_memory();
  common::use_huge_pages();
  void* block = std::malloc(std::size_t{8} << 20);  // below the 16 MB mmap threshold: from the heap's pad
  REQUIRE(block);
  // past the first, partial 2 MB
  const std::string flags = mapping_flags(reinterpret_cast<std::uintptr_t>(block) + (std::size_t{4} << 20));
  std::free(block);
  CAPTURE(flags);
  CHECK(flags.find(" hg") != std::string::npos);
#endif
}

TEST_CASE("the heap's advised range has no small page, and a block touched there is a 2 MB page (run by the case above in a process of its own)") {
  // Growing the heap writes the new top chunk's header right after use_huge_pages' probe, before
  // the advice. Were the advice to start in the 2 MB page holding that header, the page would
  // already have a small page in it and the kernel would fault all of it in 4 KB pages (tune: 486
  // faults, ~5 ms): the advised mapping had a 4 kB page resident right after use_huge_pages and
  // this test failed. Now the advice starts past that page: all that is resident of the advised
  // mapping is in 2 MB pages (Rss = AnonHugePages), and a block touched there is faulted in as a
  // 2 MB page. A control mapping, advised and touched alike, tells a machine that gives no
  // huge page at all (the test says so and passes that part) from the defect.
#if defined(SLICETUNE_TEST_SANITIZED) || !defined(__GLIBC__)
  MESSAGE("skipped: a sanitizer's allocator or not glibc");
#else
  if (!in_own_process("SLICETUNE_TEST_FRESH_HEAP")) return;
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  common::keep_freed_memory();
  common::use_huge_pages();
  // the advised range ends at the last 2 MB boundary below the heap's end
  const std::uintptr_t inside = (reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~(kHuge - 1)) - 1;
  CHECK(mapping_flags(inside).find(" hg") != std::string::npos);
  // what is resident of it is in 2 MB pages only (the allocations since the advice: the kept block's record)
  CHECK(mapping_kb(inside, "Rss:") == mapping_kb(inside, "AnonHugePages:"));
  // 8 MB: more than any hole below the advised range, so from the pad
  char* const block = static_cast<char*>(std::malloc(std::size_t{8} << 20));
  REQUIRE(block != nullptr);
  const std::uintptr_t page = (reinterpret_cast<std::uintptr_t>(block) + kHuge) & ~(kHuge - 1);  // a whole 2 MB page of the block
  CHECK(mapping_flags(page).find(" hg") != std::string::npos);
  const long before = mapping_kb(page, "AnonHugePages:");
  *reinterpret_cast<volatile char*>(page) = 1;
  const long after = mapping_kb(page, "AnonHugePages:");
  // control: a fresh mapping of 4 MB (one whole aligned 2 MB page inside), advised and touched
  void* raw = mmap(nullptr, 2 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(raw != MAP_FAILED);
  const std::uintptr_t aligned = (reinterpret_cast<std::uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1);
  const bool advised = madvise(reinterpret_cast<void*>(aligned), kHuge, MADV_HUGEPAGE) == 0;
  *reinterpret_cast<volatile char*>(aligned) = 1;
  const long control = mapping_kb(aligned, "AnonHugePages:");
  munmap(raw, 2 * kHuge);
  std::free(block);
  CAPTURE(before);
  CAPTURE(after);
  CAPTURE(control);
  if (!advised || control < 2048) MESSAGE("not checked: this machine gave no huge page to an advised mapping (the control)");
  else CHECK(after - before >= 2048);
#endif
}

TEST_CASE("prefault_heap faults the heap's first advised pages in ahead, and a thread its arena's (run by the case above in a process of its own)") {
  // tune and whatif's threads fault in the first 8 MB of the main heap and of their arenas while
  // the program starts up (tuner::start_threads). Here 4 MB: prefault_heap says it populated 4 MB,
  // that much of the advised range is resident, and a block allocated afterwards lies
  // on pages already present - touching it takes no page fault (getrusage's minor faults). A
  // thread's use_huge_pages_in_thread(4 MB) makes its arena's mapping hold at least 4 MB. Where
  // the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14) or gives no advice, prefault_heap
  // says 0 and the test says so. (Without the populate the heap held one 2 MB page and the
  // thread's arena 8 kB: the checks fail.)
#if defined(SLICETUNE_TEST_SANITIZED) || !defined(__GLIBC__)
  MESSAGE("skipped: a sanitizer's allocator or not glibc");
#else
  if (!in_own_process("SLICETUNE_TEST_FRESH_PREFAULT")) return;
  constexpr std::size_t kMB = std::size_t{1} << 20;
  common::keep_freed_memory();
  common::use_huge_pages();
  const std::uintptr_t inside = (reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~((std::uintptr_t{2} << 20) - 1)) - 1;
  const long before = mapping_kb(inside, "Rss:");
  // a prefault gives way to work (the search's first job): `stop` is asked before each 2 MB page
  // and true ends it there - asked first, nothing populated; false once, one page
  int asked = 0;
  CHECK(common::prefault_heap(4 * kMB, [&] { return ++asked >= 1; }) == 0);
  CHECK(asked == 1);
  asked = 0;
  const std::size_t first_page = common::prefault_heap(4 * kMB, [&] { return ++asked >= 2; });
  const std::size_t done = common::prefault_heap(4 * kMB);
  if (done == 0) {
    MESSAGE("not checked: this kernel populated nothing (no MADV_POPULATE_WRITE, or the heap was not advised)");
    return;
  }
  CHECK(first_page == 2 * kMB);
  CHECK(asked == 2);
  CHECK(done == 4 * kMB);
  const long after = mapping_kb(inside, "Rss:");
  CAPTURE(before);
  CAPTURE(after);
  CHECK(after >= before);
  CHECK(after >= 4096);  // the 4 MB are resident now (some of them may have been before)
  // a 1 MB block from the start of the advised range, touched page by page: no fault
  char* const block = static_cast<char*>(std::malloc(kMB));
  REQUIRE(block != nullptr);
  rusage u0{}, u1{};
  getrusage(RUSAGE_SELF, &u0);
  for (std::size_t k = 0; k < kMB; k += 4096) block[k] = 1;
  getrusage(RUSAGE_SELF, &u1);
  std::free(block);
  CHECK(u1.ru_minflt - u0.ru_minflt == 0);
  long arena = -1;
  std::thread([&arena] {
    common::use_huge_pages_in_thread(4 * kMB);
    void* b = std::malloc(kMB);
    if (!b) return;  // arena stays -1: the check below fails
    // past the page its header may share with the kept block (the case below): in the advised range
    arena = mapping_kb(reinterpret_cast<std::uintptr_t>(b) + 4096, "Rss:");
    std::free(b);
  }).join();
  CAPTURE(arena);
  CHECK(arena >= 4096);
#endif
}

TEST_CASE("a new thread's arena is advised for huge pages (common::use_huge_pages_in_thread; run by the case above in a process of its own)") {
  // use_huge_pages_in_thread advises the thread's heap past its first 2 MB page and keeps the rest
  // of that page allocated, so the thread's first block lies in the advised range ("hg"). Without
  // the call the heap has no "hg"; without the kept rest a 1 MB block comes from the first page.
#if defined(SLICETUNE_TEST_SANITIZED) || !defined(__GLIBC__)
  MESSAGE("skipped: a sanitizer's allocator or not glibc");
#else
  if (!in_own_process("SLICETUNE_TEST_FRESH_ARENA")) return;
  common::keep_freed_memory();
  common::use_huge_pages();
  std::string own;
  std::thread([&own] {
    common::use_huge_pages_in_thread();
    void* b = std::malloc(std::size_t{1} << 20);
    if (!b) return;  // own stays empty: the check below fails
    own = mapping_flags(reinterpret_cast<std::uintptr_t>(b) + 4096);  // past the page its header may share with the kept block
    std::free(b);
  }).join();
  CAPTURE(own);
  CHECK(own.find(" hg") != std::string::npos);
#endif
}

TEST_CASE("common::start_detached_thread starts its thread on another CPU than the caller's, then lets it go anywhere the caller may") {
  // A new thread is queued on its creator's CPU; where the creator keeps that CPU busy it waited
  // there for the creator's time slice (3.5-3.9 ms on this VM, the other CPU idle). The thread is
  // created allowed only the other CPUs, then takes back the caller's set as it starts. Checked
  // here: the body runs once; its CPU set is the caller's whole set (a hint, not a pin); and with
  // the caller spinning on its CPU (the first two of its CPUs in turn, each start after 20 ms
  // asleep), the body runs on another CPU in at least 15 of 20 starts (a margin for the caller
  // being moved between its CPU read and the start): 20 of 20 here. A plain std::thread ran there
  // in 1 of 20 (19 on the spinning caller's CPU): the check fails. Needs >= 2 CPUs.
#if defined(__linux__) && defined(__GLIBC__)
  cpu_set_t mine;
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  if (CPU_COUNT(&mine) < 2) {
    MESSAGE("not checked: this thread may run on one CPU only");
    return;
  }
  std::vector<int> cpus;  // two of this thread's CPUs: the caller starts from each in turn
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  int elsewhere = 0;
  for (int trial = 0; trial < 20; ++trial) {
    // onto one of the two CPUs, then the whole set again (a thread stays where it is unless moved)
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<std::size_t>(trial % 2)], &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
    REQUIRE(sched_setaffinity(0, sizeof mine, &mine) == 0);
    // asleep a while first, as a process that has just started: a busy creator's CPU looks loaded
    // to the kernel, which then places a new thread elsewhere itself (a plain std::thread did, 20 of
    // 20 starts after 5 ms of spinning); after 20 ms asleep it placed it on the creator's CPU
    usleep(20000);
    std::atomic<int> runs{0}, cpu{-1};
    std::atomic<bool> same_set{false};
    const int here = sched_getcpu();
    common::start_detached_thread([&] {
      cpu_set_t set;
      const int c = sched_getcpu();
      same_set = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_EQUAL(&set, &mine);
      cpu = c;
      runs.fetch_add(1);
    });
    // spin, as a busy creator (bounded: 2 s)
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (runs.load() == 0 && std::chrono::steady_clock::now() < until) {
    }
    REQUIRE(runs.load() == 1);
    CHECK(same_set.load());
    if (cpu.load() != here) ++elsewhere;
  }
  CAPTURE(elsewhere);
  CHECK(elsewhere >= 15);
#else
  MESSAGE("not checked: no CPU placement here (not Linux with glibc)");
#endif
}
