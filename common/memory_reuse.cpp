#include "common/memory_reuse.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>  // defines __GLIBC__ on glibc systems
#include <functional>
#include <mutex>
#include <vector>

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

namespace {
std::atomic<bool> huge_pages{false};  // use_huge_pages was called
std::atomic<std::uintptr_t> advised_lo{0}, advised_hi{0};  // the main heap's advised range (use_huge_pages)

/// Faults in the first `bytes` (whole 2 MB pages) of the advised range [lo, hi) - their contents
/// unchanged (MADV_POPULATE_WRITE, Linux 5.14) - a 2 MB page at a time, asking `stop` (where
/// given) before each: the bytes populated, 0 where that fails or is not available.
std::size_t populate(std::uintptr_t lo, std::uintptr_t hi, std::size_t bytes, const std::function<bool()>& stop) {
#if defined(__GLIBC__) && defined(MADV_POPULATE_WRITE)
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  if (lo == 0 || hi <= lo) return 0;
  const std::size_t n = std::min<std::size_t>(bytes, hi - lo) & ~(kHuge - 1);
  std::size_t done = 0;
  for (; done < n; done += kHuge) {
    if (stop && stop()) break;
    if (madvise(reinterpret_cast<void*>(lo + done), kHuge, MADV_POPULATE_WRITE) != 0) break;
  }
  return done;
#else
  (void)lo, (void)hi, (void)bytes, (void)stop;
  return 0;
#endif
}

/// A block held for the process's life, its pages never touched: address space, no memory.
void keep_untouched(void* block) {
  static std::mutex mu;
  // never destroyed: reachable from this static pointer to the end, after the static destructors
  // have run, so LeakSanitizer's check at exit does not count the blocks as leaks
  static auto* const kept = new std::vector<void*>;
  std::lock_guard lock(mu);
  kept->push_back(block);
}
}  // namespace

void detail::keep_until_exit(std::shared_ptr<const void> object) {
  static std::mutex mu;
  // never destroyed (so neither is any object in it), reachable from this static pointer to the end
  static auto* const kept = new std::vector<std::shared_ptr<const void>>;
  std::lock_guard lock(mu);
  kept->push_back(std::move(object));
}

void use_huge_pages() {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  huge_pages.store(true, std::memory_order_relaxed);
  // Transparent huge pages for the heap, as glibc's glibc.malloc.hugetlb=1 tunable would give (a
  // tunable is read from the environment before main, so it cannot be set from here): the heap
  // grows by a 64 MB pad at once (address space only: pages are touched as used) and that range
  // is advised MADV_HUGEPAGE, so a fresh process faults in a 2 MB page where it faulted 512 small
  // ones (the kernel's default "madvise" mode honours the advice; "never" ignores it, harmlessly).
  // `tune`: 2,700 -> ~900 page faults, 114 -> 83 ms a process on one thread; `simulate` 272 -> 130
  // faults, 6.3 -> 5.1 ms (docs/benchmarks.md).
  constexpr std::size_t kPad = std::size_t{64} << 20, kHuge = std::size_t{2} << 20;
  mallopt(M_TOP_PAD, static_cast<int>(kPad));
  // an allocation larger than what the heap has free makes it grow now (by the pad); freed, it
  // stays in the heap (the trim threshold above)
  void* probe = std::malloc(kHuge);
  if (probe) {
    const auto at = reinterpret_cast<std::uintptr_t>(probe);
    // Growing the heap wrote the new top chunk's header right after the probe, before any advice:
    // the 2 MB page holding that header already has a small page in it, so the kernel would fault
    // the whole of it in 4 KB pages (486 faults of `tune`, ~5 ms here). The advice starts at the
    // next 2 MB boundary after that header.
    const auto lo = (at + kHuge + 64 + kHuge - 1) & ~(kHuge - 1);
    const auto hi = reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~(kHuge - 1);
    // advice: failure changes nothing. The probe is grown in place (into the top chunk after it)
    // to just below the advised range and kept allocated, its pages never touched
    // (use_huge_pages_in_thread): what the command allocates next comes from the advised pages,
    // not from the small ones below them
    if (hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0) {
      advised_lo.store(lo, std::memory_order_relaxed);
      advised_hi.store(hi, std::memory_order_relaxed);
      void* kept = std::realloc(probe, lo - at - 256);
      if (!kept) std::free(probe);
      else if (kept == probe) keep_untouched(kept);
      else std::free(kept);  // moved (not glibc's in-place growth): nothing to hold
    } else {
      std::free(probe);
    }
  }
#endif
}

void use_huge_pages_in_thread(std::size_t prefault, const std::function<bool()>& stop) {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  if (!huge_pages.load(std::memory_order_relaxed)) return;
  // A thread's first allocation creates its arena: a heap aligned to glibc's HEAP_MAX_SIZE (64 MB
  // on 64-bit: 2 x the 32 MB largest mmap threshold), writable to the 64 MB top pad at once. The
  // probe lies in its first 2 MB page, already faulted in small pages (the heap's header, the
  // thread's tcache); from the next 2 MB boundary to the heap's end the range is advised, as
  // glibc.malloc.hugetlb=1 advises a new heap whole. The rest of that first page is taken by one
  // block kept for the process's life and never touched (address space, no memory): the thread's
  // allocations start on the advised pages. Were the probe elsewhere (the main heap, when glibc
  // reuses an arena) the range is the main heap's or unmapped: advice, or ENOMEM.
  constexpr std::uintptr_t kHeap = std::uintptr_t{64} << 20, kHuge = std::uintptr_t{2} << 20;
  void* probe = std::malloc(64);
  if (!probe) return;
  const auto at = reinterpret_cast<std::uintptr_t>(probe);
  const std::uintptr_t lo = (at + kHuge) & ~(kHuge - 1), hi = (at & ~(kHeap - 1)) + kHeap;
  if (hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0) {
    const std::uintptr_t gap = lo - at;  // the probe, its chunk header and the rest of the page
    if (gap > 256 * 1024) keep_untouched(std::malloc(gap - 256));
    populate(lo, hi, prefault, stop);
  }
  std::free(probe);
#endif
}

std::size_t prefault_heap(std::size_t bytes, const std::function<bool()>& stop) {
  return populate(advised_lo.load(std::memory_order_relaxed), advised_hi.load(std::memory_order_relaxed), bytes, stop);
}

}  // namespace common
