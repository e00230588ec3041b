#include "common/cuda_plugin.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>

#include "common/config_error.hpp"

namespace common {
namespace {

constexpr const char* kPluginFile = "libslicetune_cuda.so";

std::string plugin_path() {
  if (const char* p = std::getenv("SLICETUNE_CUDA_PLUGIN"); p && *p) return p;
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return kPluginFile;
  std::string dir(exe, static_cast<std::size_t>(n));
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  return dir + kPluginFile;
}

}  // namespace

void* cuda_plugin_symbol(const char* name) {
  static std::mutex mu;
  static void* handle = nullptr;
  std::lock_guard lock(mu);
  if (!handle) {
    const std::string path = plugin_path();
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed: objects it made live until exit
    if (!handle) {
      const char* why = ::dlerror();
      throw ConfigError("--backend cuda", "", fmt::format("cannot load the CUDA backend ({}): {}; it needs the CUDA runtime, cuBLASLt and NCCL", path,
                                                          why ? why : "unknown reason"));
    }
  }
  ::dlerror();
  void* sym = ::dlsym(handle, name);
  if (!sym) throw ConfigError("--backend cuda", "", fmt::format("the CUDA plug-in has no {}: a plug-in from another build?", name));
  return sym;
}

}  // namespace common
