// defines: common::PluginError, common::catch_into (a plug-in entry point's side),
//          common::rethrow_plugin_error (the program's side)
//
// The slicetune program carries its own C++ runtime (linked statically: SLICETUNE_STATIC_RUNTIME,
// docs/benchmarks.md) and the MPI plug-in uses the shared one, so an exception must not unwind from
// the plug-in's frames into the program's: each runtime keeps its own count of exceptions in
// flight, and a catch in one of an exception thrown by the other leaves both counts wrong. An
// entry point of the plug-in runs its work through catch_into, which hands what it throws over as
// data; the program's side throws it again with rethrow_plugin_error: a common::ConfigError as a
// ConfigError (bad input: exit 2, one line), anything else as std::runtime_error (exit 1), each
// with the same message.
#pragma once
#include <exception>
#include <stdexcept>
#include <string>

#include "common/config_error.hpp"

namespace common {

/// @brief An exception thrown inside a plug-in, as data (none while kind is none).
struct PluginError {
  enum class Kind { none, config, other } kind = Kind::none;
  std::string message;  ///< what()
};

/// @brief Runs `work`, catching whatever it throws into `*error`: never throws.
template <class F>
void catch_into(PluginError* error, F&& work) noexcept {
  try {
    work();
  } catch (const ConfigError& e) {
    error->kind = PluginError::Kind::config;
    error->message = e.what();
  } catch (const std::exception& e) {
    error->kind = PluginError::Kind::other;
    error->message = e.what();
  } catch (...) {
    error->kind = PluginError::Kind::other;
    error->message = "an exception of unknown type in the MPI plug-in";
  }
}

/// @brief Throws again what a plug-in caught (catch_into); nothing when it caught nothing.
inline void rethrow_plugin_error(const PluginError& e) {
  if (e.kind == PluginError::Kind::config) throw ConfigError(ConfigError::whole_message, e.message);
  if (e.kind == PluginError::Kind::other) throw std::runtime_error(e.message);
}

}  // namespace common
