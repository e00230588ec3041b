// defines: common::write_file_atomically (never leaves a half-written or lost user file)
#pragma once
#include <string>

namespace common {

/// @brief Writes `content` to `path` via a temporary file in the same folder and rename(2), so the
/// file is either the old one or the new one, never a partial write. Throws ConfigError on failure.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace common
