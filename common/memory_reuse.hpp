// defines: common::keep_freed_memory (process setting for programs that build many step graphs)
#pragma once

namespace common {

/// @brief Asks the C library to keep freed memory for reuse instead of returning it to the OS after
/// each graph. Building and simulating a step graph allocates a few MB that are freed right after;
/// glibc's defaults unmap or trim them every time, and the page faults of the next graph then cost
/// more than the build itself (measured: 928 -> 386 us per gpt3-13b graph in bench_simulate).
/// Call once at program start; harmless elsewhere.
void keep_freed_memory();

}  // namespace common
