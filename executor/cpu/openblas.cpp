#include "executor/cpu/openblas.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "common/config_error.hpp"

namespace executor::cpu {
namespace {

/// The soname a link with -lopenblas records (Debian: the libopenblas.so.0 alternative), then the
/// file CMake found, in case the soname is not on the loader's path.
void* load() {
  std::string why;
  for (const char* name : {"libopenblas.so.0", SLICETUNE_OPENBLAS_LIBRARY}) {
    if (void* h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;  // never closed: used until exit
    const char* e = ::dlerror();
    why += fmt::format("{}{}", why.empty() ? "" : "; ", e ? e : name);
  }
  throw common::ConfigError("--backend cpu", "", fmt::format("cannot load OpenBLAS: {}; install libopenblas0", why));
}

template <class F>
void resolve(void* h, F& f, const char* name) {
  f = reinterpret_cast<F>(::dlsym(h, name));
  if (!f) throw common::ConfigError("--backend cpu", "", fmt::format("the OpenBLAS library found has no {}", name));
}

OpenBlas make() {
  void* h = load();
  OpenBlas b;
  resolve(h, b.sgemm, "cblas_sgemm");
  resolve(h, b.set_num_threads, "openblas_set_num_threads");
  resolve(h, b.get_config, "openblas_get_config");
  resolve(h, b.get_corename, "openblas_get_corename");
  return b;
}

}  // namespace

const OpenBlas& openblas() {
  static const OpenBlas b = make();  // thread-safe initialisation; a throw leaves it to be retried
  return b;
}

}  // namespace executor::cpu
