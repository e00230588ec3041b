// slicetune: argument parsing and printing only; the logic lives in the library folders.
#include "cli/app.hpp"
#include "common/memory_reuse.hpp"

int main(int argc, char** argv) {
  common::keep_freed_memory();
  return cli::run(argc, argv);
}
