#include "common/memory_reuse.hpp"

#include <cstdint>
#include <cstdlib>  // defines __GLIBC__ on glibc systems

#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace common {

void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 16 << 20);  // graphs' arrays come from the heap, not from fresh mappings
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // keep up to 1 GB of freed heap instead of trimming it
#endif
}

void use_huge_pages() {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  // Transparent huge pages for the heap, as glibc's glibc.malloc.hugetlb=1 tunable would give (a
  // tunable is read from the environment before main, so it cannot be set from here): the heap
  // grows by a 64 MB pad at once (address space only: pages are touched as used) and that range
  // is advised MADV_HUGEPAGE, so a fresh process faults in a 2 MB page where it faulted 512 small
  // ones (the kernel's default "madvise" mode honours the advice; "never" ignores it, harmlessly).
  // `tune`: 2,700 -> ~900 page faults, 114 -> 83 ms a process on one thread (docs/benchmarks.md).
  // Not for every command: the first huge page's zeroing costs `simulate` ~0.5 ms of its ~7.
  constexpr std::size_t kPad = std::size_t{64} << 20, kHuge = std::size_t{2} << 20;
  mallopt(M_TOP_PAD, static_cast<int>(kPad));
  // an allocation larger than what the heap has free makes it grow now (by the pad); freed, it
  // stays in the heap (the trim threshold above)
  void* probe = std::malloc(kHuge);
  if (probe) {
    const auto lo = (reinterpret_cast<std::uintptr_t>(probe) + kHuge - 1) & ~(kHuge - 1);
    const auto hi = reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~(kHuge - 1);
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // advice: failure changes nothing
    std::free(probe);
  }
#endif
}

}  // namespace common
