#include "common/memory_reuse.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc systems

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace common {

void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 16 << 20);  // graphs' arrays come from the heap, not from fresh mappings
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // keep up to 1 GB of freed heap instead of trimming it
#endif
}

}  // namespace common
