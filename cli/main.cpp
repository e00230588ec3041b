// slicetune: argument parsing and printing only; the logic lives in the library folders.
#include "cli/app.hpp"
#include "common/memory_reuse.hpp"
#include "common/process_exit.hpp"
#include "tuner/search.hpp"

#include <cstddef>
#include <string_view>

namespace {
// The heap's settings, before the static initializers (a constructor of priority 101 runs before
// those of the default priority): from the process's first allocations on - the flags' and the
// command table's - the heap keeps what it frees and lies on transparent huge pages
// (common/memory_reuse.hpp). A 4 KB page fault costs ~10 us on this VM; `simulate` faulted ~136
// heap pages and `--version` ~20.
[[gnu::constructor(101)]] void heap_settings() {
  common::keep_freed_memory();
  common::use_huge_pages();
}

/// `tune` and `whatif` search on every core unless --threads says otherwise: the search's threads
/// start now, each faulting in the first 8 MB of the heap it will allocate from (a default `tune`
/// held 8 MB of the main heap and 8 MB of its thread's arena at its end), while this thread parses
/// the flags and reads the configs (~1.5 ms). Otherwise the search found those pages absent and
/// faulted them in itself, a 2 MB page at a time (tuner::start_threads, docs/benchmarks.md).
void start_search_threads(int argc, char** argv) {
  if (argc < 2) return;
  const std::string_view command = argv[1];
  if (command != "tune" && command != "whatif") return;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--threads" || a.starts_with("--threads=") || a == "--help" || a == "-h") return;
  }
  tuner::start_threads(0, std::size_t{8} << 20);
}
}  // namespace

int main(int argc, char** argv) {
  common::note_loaded_objects();
  start_search_threads(argc, argv);
  // without the process's teardown where nothing needs it (common/process_exit.hpp)
  common::end_process(cli::run(argc, argv));
}
