// defines: common::keep_freed_memory, common::use_huge_pages, use_huge_pages_in_thread, prefault_heap (process settings for programs that build many step graphs),
//          common::keep_until_exit (objects a command leaves to the process's exit instead of freeing)
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

namespace common {

/// @brief Asks the C library to keep freed memory for reuse instead of returning it to the OS after
/// each graph. Building and simulating a step graph allocates a few MB that are freed right after;
/// glibc's defaults unmap or trim them every time, and the page faults of the next graph then cost
/// more than the build itself (measured: 928 -> 386 us per gpt3-13b graph in bench_simulate).
/// Call once at program start; harmless elsewhere.
void keep_freed_memory();

/// @brief After keep_freed_memory, once per process (the slicetune program calls both before its
/// static initializers, cli/main.cpp): the heap grows by 64 MB of address space at once and that
/// range is advised MADV_HUGEPAGE (transparent huge pages, as glibc's glibc.malloc.hugetlb=1
/// tunable gives), so a fresh process faults its heap in 2 MB pages instead of 4 KB ones: a fault
/// costs ~10 us on this VM; `tune` faulted 2,700 times (20 ms of its ~110), `simulate` ~136 times
/// in its heap (docs/benchmarks.md). Advice only: where the kernel ignores it nothing changes.
void use_huge_pages();

/// @brief The calling thread's own malloc arena advised as use_huge_pages advises the main heap,
/// where use_huge_pages has been called in this process (otherwise nothing). For threads that
/// allocate much (the search's helpers): glibc gives each a heap of its own, 64 MB of address
/// space made writable at once (the pad), faulted in 4 KB pages without the advice - the second
/// thread of `tune` faulted ~1,300 times. Call first thing in the thread. Advice only.
/// `prefault`: the first bytes of the advised range faulted in now (as prefault_heap, `stop` as there).
void use_huge_pages_in_thread(std::size_t prefault = 0, const std::function<bool()>& stop = {});

/// @brief After use_huge_pages: faults in the first `bytes` of the main heap's advised range now
/// (whole 2 MB pages; their contents unchanged: madvise MADV_POPULATE_WRITE, Linux 5.14), so that
/// what allocates there later finds its pages present. For a thread with nothing else to do while
/// the main one starts up (tuner::start_threads): a fault here is the kernel zeroing a 2 MB page,
/// 0.1-1.2 ms on this VM (likely the host backing it too). Returns the bytes faulted in: 0 where it
/// fails, where use_huge_pages gave no advice (a sanitizer's allocator, THP off), or without
/// MADV_POPULATE_WRITE. A 2 MB page at a time: where `stop` is given it is asked before each page,
/// and true ends the prefault there (the thread has work of its own now; what is left faults in
/// as it is used).
std::size_t prefault_heap(std::size_t bytes, const std::function<bool()>& stop = {});

namespace detail {
void keep_until_exit(std::shared_ptr<const void> object);
}

/// @brief `object`, kept until the process ends and never destroyed: for what a command builds
/// once and reads to its end - large caches of small allocations - so that freeing them does not
/// delay the exit (as clang's -disable-free: the process's exit returns the memory whole). The
/// `tune` command's search caches took ~0.6 ms of a ~35 ms process to free (docs/benchmarks.md).
/// Reachable to the end from a static list, so LeakSanitizer does not count it as a leak. For a
/// program's commands only: a library function that runs many times would keep every copy.
template <class T>
T& keep_until_exit(std::unique_ptr<T> object) {
  T& kept = *object;
  detail::keep_until_exit(std::shared_ptr<const void>(std::move(object)));
  return kept;
}

}  // namespace common
