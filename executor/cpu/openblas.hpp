// defines: executor::cpu::openblas (the OpenBLAS entry points the CPU backend and profiler use,
//          loaded with dlopen on first use, so that commands which never run a GEMM - simulate,
//          tune, --help - do not map OpenBLAS and pay for its ~16,000 relocations at start-up)
#pragma once
#include <cblas.h>

namespace executor::cpu {

/// @brief OpenBLAS's functions, resolved from the library loaded on the first call (thread-safe).
struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&openblas_get_config) get_config = nullptr;
  decltype(&openblas_get_corename) get_corename = nullptr;
};

/// Loads OpenBLAS (its soname, then the library CMake found) on the first call. Throws
/// common::ConfigError naming --backend cpu and the loader's reason when it cannot be loaded or
/// lacks one of the functions.
const OpenBlas& openblas();

}  // namespace executor::cpu
