// defines: common::small_alloc (the per-thread cache in front of malloc of the programs that link
//          common/small_alloc.cpp: the slicetune program, the benchmarks and the tests)
#pragma once
#include <cstddef>

namespace common::small_alloc {

/// Requests of at most this many bytes are served from the calling thread's cache (16-byte classes).
inline constexpr std::size_t kMaxSmall = 1024;
/// A class holds at most this many freed blocks (glibc's own per-thread cache, the tcache, holds 7
/// per size unless GLIBC_TUNABLES says otherwise) ...
inline constexpr std::size_t kMaxBlocksPerClass = 1024;
/// ... and at most this many bytes of them, so a thread holds at most 64 x 64 KiB = 4 MiB.
inline constexpr std::size_t kMaxBytesPerClass = std::size_t{64} << 10;

/// Whether this program's operator new and delete keep the cache: false in sanitizer builds (their
/// allocators must see every new and delete to find misuse), where the operators come from the C++
/// library instead.
bool active();

/// What the calling thread's cache holds now.
struct Held {
  std::size_t blocks = 0, bytes = 0;
};
Held held();

/// Blocks (and bytes) held in the calling thread's class of `bytes` (1 .. kMaxSmall).
Held held_in_class(std::size_t bytes);

/// Returns every block the calling thread's cache holds to malloc (a thread that ends does this itself).
void release();

}  // namespace common::small_alloc
