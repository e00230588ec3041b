// The replaceable global operator new and delete of the programs that link this file: a per-thread
// cache of freed small blocks in front of malloc.
//
// Why: the search builds and simulates hundreds of step graphs, each a few hundred short-lived
// allocations (~225,000 in a default `slicetune tune`); glibc keeps only 7 freed blocks of a size per
// thread (its tcache) and sends the rest through its bins, where malloc and free took ~11 % of the
// instructions. GLIBC_TUNABLES=glibc.malloc.tcache_count=1000 made `tune` ~1.5 ms (4 %) faster here,
// but a tunable is read only from the environment at start-up; mimalloc, jemalloc and tcmalloc were
// slower here (they fault their memory in 4 KiB pages; docs/benchmarks.md). So: the same idea as a
// larger tcache, in the program. A freed block of at most kMaxSmall bytes goes onto its thread's
// list of its 16-byte class (up to kMaxBlocksPerClass blocks, kMaxBytesPerClass bytes), and the next
// request of that class takes the last one freed; everything else is malloc and free.
//
// A block's class comes from malloc_usable_size, not from the size the caller gives delete: a block
// that some other code allocated with malloc (a plug-in's own operator new) and this program
// deletes is then filed under a class no larger than it. Blocks are malloc's own, so free() (and a
// plug-in's delete) may take any of them.
//
// Not under AddressSanitizer (and its leak checker), ThreadSanitizer or MemorySanitizer: they must
// see every new and delete (a cached block would hide a use after free); there the C++ library's
// operators stay. Nor off glibc (malloc_usable_size).
#include "common/small_alloc.hpp"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <new>

#include <pthread.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SLICETUNE_NO_SMALL_ALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLICETUNE_NO_SMALL_ALLOC 1
#endif
#if !defined(__GLIBC__)  // malloc_usable_size is glibc's
#define SLICETUNE_NO_SMALL_ALLOC 1
#endif

#if !defined(SLICETUNE_NO_SMALL_ALLOC)
#include <malloc.h>
#endif

namespace common::small_alloc {

namespace {

constexpr std::size_t kGrain = 16;
constexpr std::size_t kClasses = kMaxSmall / kGrain;  // classes 1 .. kClasses; class c: (c - 1) * 16 + 1 .. c * 16 bytes
static_assert(kMaxSmall % kGrain == 0);

constexpr std::array<std::uint32_t, kClasses + 1> caps() {
  std::array<std::uint32_t, kClasses + 1> a{};
  for (std::size_t c = 1; c <= kClasses; ++c) {
    const std::size_t by_bytes = kMaxBytesPerClass / (c * kGrain);
    a[c] = static_cast<std::uint32_t>(by_bytes < kMaxBlocksPerClass ? by_bytes : kMaxBlocksPerClass);
  }
  return a;
}
[[maybe_unused]] constexpr auto kCap = caps();  // (read only where the cache is kept)

/// The calling thread's lists. Trivially destructible (zero-initialised thread storage, no guard
/// on access); Release below returns the blocks when a thread ends.
struct Lists {
  void* head[kClasses + 1];
  std::uint32_t count[kClasses + 1];
  enum : std::uint8_t { unregistered, live, ended } state;
};
thread_local Lists lists;

void release_lists(Lists& l) {
  for (std::size_t c = 1; c <= kClasses; ++c) {
    while (void* p = l.head[c]) {
      l.head[c] = *static_cast<void**>(p);
      std::free(p);
    }
    l.count[c] = 0;
  }
}

/// The thread that ran the static initializers: its blocks are left to the process's end, as the
/// program leaves its caches (common::keep_until_exit) - freeing them one by one would only delay
/// the exit.
const pthread_t main_thread = pthread_self();

/// Constructed on the first block a thread caches, so that its destructor runs when the thread ends.
struct Release {
  bool armed = false;
  ~Release() {
    if (!pthread_equal(pthread_self(), main_thread)) release_lists(lists);
    lists.state = Lists::ended;  // deletes after this (other thread_locals' destructors) free at once
  }
};
thread_local Release release_at_exit;

}  // namespace

#if !defined(SLICETUNE_NO_SMALL_ALLOC)

bool active() { return true; }

namespace {

[[gnu::noinline]] void* allocate(std::size_t n) {
  for (;;) {
    if (void* p = std::malloc(n)) return p;
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}

inline void* take(std::size_t n) {
  if (n == 0) n = 1;
  if (n <= kMaxSmall) {
    const std::size_t c = (n + kGrain - 1) / kGrain;
    Lists& l = lists;
    if (void* p = l.head[c]) {
      l.head[c] = *static_cast<void**>(p);
      --l.count[c];
      return p;
    }
    n = c * kGrain;  // the whole class: the block can serve any request of its class when freed
  }
  return allocate(n);
}

[[gnu::noinline]] void start_caching(Lists& l) {
  l.state = Lists::live;
  release_at_exit.armed = true;  // constructs it: its destructor runs when this thread ends
}

inline void give(void* p) noexcept {
  if (!p) return;
  const std::size_t c = malloc_usable_size(p) / kGrain;  // the largest class the block can serve
  Lists& l = lists;
  if (c >= 1 && c <= kClasses && l.count[c] < kCap[c] && l.state != Lists::ended) {
    if (l.state == Lists::unregistered) start_caching(l);
    *static_cast<void**>(p) = l.head[c];
    l.head[c] = p;
    ++l.count[c];
    return;
  }
  std::free(p);
}

}  // namespace

#else

bool active() { return false; }

#endif

Held held() {
  Held h;
  for (std::size_t c = 1; c <= kClasses; ++c) {
    h.blocks += lists.count[c];
    h.bytes += lists.count[c] * c * kGrain;
  }
  return h;
}

Held held_in_class(std::size_t bytes) {
  if (bytes == 0 || bytes > kMaxSmall) return {};
  const std::size_t c = (bytes + kGrain - 1) / kGrain;
  return {lists.count[c], lists.count[c] * c * kGrain};
}

void release() { release_lists(lists); }

}  // namespace common::small_alloc

#if !defined(SLICETUNE_NO_SMALL_ALLOC)

// The replaceable global allocation functions ([new.delete.single], [new.delete.array]); the
// nothrow and aligned forms stay the C++ library's (its nothrow forms call these; its aligned forms
// use aligned_alloc and free, never these).
void* operator new(std::size_t n) { return common::small_alloc::take(n); }
void* operator new[](std::size_t n) { return common::small_alloc::take(n); }
void operator delete(void* p) noexcept { common::small_alloc::give(p); }
void operator delete[](void* p) noexcept { common::small_alloc::give(p); }
void operator delete(void* p, std::size_t) noexcept { common::small_alloc::give(p); }
void operator delete[](void* p, std::size_t) noexcept { common::small_alloc::give(p); }

#endif
