// slicetune: argument parsing and printing only; the logic lives in the library folders.
#include "cli/app.hpp"
#include "common/memory_reuse.hpp"

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
}  // namespace

int main(int argc, char** argv) { return cli::run(argc, argv); }
