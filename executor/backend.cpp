#include "executor/backend.hpp"

namespace executor {

std::string_view to_string(BackendKind k) { return k == BackendKind::cpu ? "cpu" : "cuda"; }

bool parse_backend_kind(std::string_view s, BackendKind& out) {
  if (s == "cpu") out = BackendKind::cpu;
  else if (s == "cuda") out = BackendKind::cuda;
  else return false;
  return true;
}

}  // namespace executor
