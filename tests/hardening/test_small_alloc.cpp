// common/small_alloc.cpp: the per-thread cache of small freed blocks in front of malloc that the
// programs' operator new and delete keep (this test program links it, as slicetune does). Every
// expected figure comes from the cache's rules in common/small_alloc.hpp: 16-byte classes up to
// kMaxSmall bytes, at most kMaxBlocksPerClass blocks and kMaxBytesPerClass bytes a class, the last
// block freed served first, a block filed by the bytes malloc says it has.
#include <doctest/doctest.h>

#include <malloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "common/small_alloc.hpp"

namespace sa = common::small_alloc;

namespace {

/// whether this build keeps the cache: not under AddressSanitizer or ThreadSanitizer
constexpr bool expect_active() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

/// operator delete with the size where the compiler declares the sized form (clang 14 only with
/// -fsized-deallocation), else without
void sized_delete(void* p, [[maybe_unused]] std::size_t n) {
#if defined(__cpp_sized_deallocation)
  ::operator delete(p, n);
#else
  ::operator delete(p);
#endif
}

/// `n` blocks of `bytes` from operator new, then all deleted
void churn(std::size_t n, std::size_t bytes) {
  std::vector<void*> blocks;
  blocks.reserve(n);
  for (std::size_t i = 0; i < n; ++i) blocks.push_back(::operator new(bytes));
  for (void* p : blocks) ::operator delete(p);
}

}  // namespace

TEST_CASE("the cache is kept in this build unless a sanitizer's allocator must see every new and delete") {
  CHECK(sa::active() == expect_active());
}

TEST_CASE("a freed small block serves the next request of its class, the last freed first") {
  if (!sa::active()) return;  // the sanitizer builds check the line above
  sa::release();
  CHECK(sa::held().blocks == 0);
  void* a = ::operator new(40);  // class of 48 bytes (33 .. 48)
  void* b = ::operator new(48);
  const auto ua = reinterpret_cast<std::uintptr_t>(a), ub = reinterpret_cast<std::uintptr_t>(b);
  ::operator delete(a);
  sized_delete(b, 48);  // the sized form files it the same way
  CHECK(sa::held_in_class(48).blocks == 2);
  CHECK(sa::held_in_class(48).bytes == 96);
  void* b2 = ::operator new(33);  // last freed, first served
  void* a2 = ::operator new(48);
  CHECK(reinterpret_cast<std::uintptr_t>(b2) == ub);
  CHECK(reinterpret_cast<std::uintptr_t>(a2) == ua);
  CHECK(sa::held_in_class(48).blocks == 0);
  void* c = ::operator new(49);  // the next class: neither of them
  CHECK(c != a2);
  CHECK(c != b2);
  ::operator delete(a2);
  ::operator delete(b2);
  ::operator delete(c);
  sa::release();
  CHECK(sa::held().blocks == 0);
}

TEST_CASE("a class holds at most kMaxBlocksPerClass blocks and kMaxBytesPerClass bytes") {
  if (!sa::active()) return;
  sa::release();
  churn(2 * sa::kMaxBlocksPerClass, 16);
  CHECK(sa::held_in_class(16).blocks == sa::kMaxBlocksPerClass);  // 1,024 (16 B x 1,024 = 16 KiB, under the 64 KiB byte cap)
  churn(2 * sa::kMaxBlocksPerClass, sa::kMaxSmall);
  CHECK(sa::held_in_class(sa::kMaxSmall).blocks == sa::kMaxBytesPerClass / sa::kMaxSmall);  // 64 KiB / 1 KiB = 64
  CHECK(sa::held_in_class(16).bytes + sa::held_in_class(sa::kMaxSmall).bytes == 16 * sa::kMaxBlocksPerClass + sa::kMaxBytesPerClass);
  sa::release();
  CHECK(sa::held().blocks == 0);
  CHECK(sa::held().bytes == 0);
}

TEST_CASE("a block larger than every class is malloc's and is not kept") {
  if (!sa::active()) return;
  sa::release();
  // 2 KiB blocks: malloc's usable size is above kMaxSmall, so no class takes them (a block of
  // kMaxSmall + 1 .. + 8 bytes may be filed under the largest class: glibc gives it 1,032 usable bytes)
  churn(10, 2 * sa::kMaxSmall);
  CHECK(sa::held_in_class(sa::kMaxSmall).blocks == 0);
  void* big = ::operator new(std::size_t{64} << 20);  // 64 MiB: malloc maps it; deleted at once
  ::operator delete(big);
  CHECK(sa::held_in_class(sa::kMaxSmall).blocks == 0);
  sa::release();
}

TEST_CASE("a block some other code took from malloc is filed under a class no larger than it") {
  if (!sa::active()) return;
  sa::release();
  // a plug-in's own operator new is malloc: its block may be deleted here. glibc gives malloc(24)
  // 24 usable bytes, so it must serve 16-byte requests only (filed under the size's class rounded
  // down), never a 32-byte one
  void* p = std::malloc(24);
  REQUIRE(p != nullptr);
  const std::size_t usable = malloc_usable_size(p);
  const auto up0 = reinterpret_cast<std::uintptr_t>(p);
  sized_delete(p, 24);
  const std::size_t cls = usable / 16 * 16;
  CHECK(sa::held().blocks == 1);
  CHECK(sa::held_in_class(cls).blocks == 1);
  if (cls < 32) {
    void* q = ::operator new(32);
    CHECK(reinterpret_cast<std::uintptr_t>(q) != up0);
    ::operator delete(q);
  }
  void* r = ::operator new(cls);
  CHECK(reinterpret_cast<std::uintptr_t>(r) == up0);
  ::operator delete(r);
  sa::release();
}

TEST_CASE("each thread keeps its own blocks and returns them when it ends") {
  if (!sa::active()) return;
  sa::release();
  // a thread that frees 1,000 blocks of 512 bytes holds as many as the class's byte cap allows until
  // it ends, then frees them all: the bytes malloc counts in use after the join are back below
  // where they would be with the thread's blocks still held
  constexpr std::size_t kHeld = sa::kMaxBytesPerClass / 512;  // 128 blocks, 64 KiB
  const std::size_t before = mallinfo2().uordblks;
  std::size_t held_there = 0;
  std::thread t([&] {
    churn(1000, 512);
    held_there = sa::held_in_class(512).blocks;
  });
  t.join();
  CHECK(held_there == kHeld);
  CHECK(sa::held().blocks == 0);  // none of them here
  const std::size_t after = mallinfo2().uordblks;
  CHECK(after < before + kHeld * 512 / 2);
  // freed here, a block of another thread's joins this thread's cache
  void* p = nullptr;
  std::thread([&] { p = ::operator new(100); }).join();
  ::operator delete(p);
  CHECK(sa::held_in_class(100).blocks == 1);
  sa::release();
}

TEST_CASE("operator new still reports exhaustion as std::bad_alloc") {
  if (!sa::active()) return;  // (a sanitizer's allocator reports such a size as an error of its own)
  // a size no allocator can give (beyond the address space): bad_alloc, as the C++ library's
  CHECK_THROWS_AS(static_cast<void>(::operator new(static_cast<std::size_t>(-1) / 2)), std::bad_alloc);
}
