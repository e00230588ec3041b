#include "common/plugin.hpp"

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

/// One plug-in: its file beside the program, the variable that overrides its path, and how a
/// failure to load it is reported (the flag or source named, what the plug-in needs).
struct Plugin {
  const char* file;
  const char* env;
  const char* source;
  const char* what;
  const char* needs;
  const char* name;
  std::mutex mu;
  void* handle = nullptr;
};

std::string plugin_path(const Plugin& p) {
  if (const char* env = std::getenv(p.env); env && *env) return env;
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return p.file;
  std::string dir(exe, static_cast<std::size_t>(n));
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  return dir + p.file;
}

void* plugin_symbol(Plugin& p, const char* name) {
  std::lock_guard lock(p.mu);
  if (!p.handle) {
    const std::string path = plugin_path(p);
    p.handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed: objects it made live until exit
    if (!p.handle) {
      const char* why = ::dlerror();
      throw ConfigError(p.source, "",
                        fmt::format("cannot load {} ({}): {}; it needs {}", p.what, path, why ? why : "unknown reason", p.needs));
    }
  }
  ::dlerror();
  void* sym = ::dlsym(p.handle, name);
  if (!sym) throw ConfigError(p.source, "", fmt::format("{} has no {}: a plug-in from another build?", p.name, name));
  return sym;
}

}  // namespace

void* cuda_plugin_symbol(const char* name) {
  static Plugin p{.file = "libslicetune_cuda.so",
                  .env = "SLICETUNE_CUDA_PLUGIN",
                  .source = "--backend cuda",
                  .what = "the CUDA backend",
                  .needs = "the CUDA runtime, cuBLASLt and NCCL",
                  .name = "the CUDA plug-in"};
  return plugin_symbol(p, name);
}

void* mpi_plugin_symbol(const char* name) {
  static Plugin p{.file = "libslicetune_mpi.so",
                  .env = "SLICETUNE_MPI_PLUGIN",
                  .source = "slicetune",
                  .what = "the MPI part of slicetune",
                  .needs = "Open MPI's libraries",
                  .name = "the MPI plug-in"};
  return plugin_symbol(p, name);
}

}  // namespace common
