// defines: common::write_file_atomically (never leaves a half-written or lost user file, never
//          replaces anything but a regular file), common::check_output_path (the same checks,
//          made before long work starts)
#pragma once
#include <string>

namespace common {

/// @brief Writes `content` to `path` via a new temporary file in the same folder and rename(2), so
/// the file is either the old one or the new one, never a partial write. Only a regular file is
/// ever replaced: a symbolic link, FIFO, device, socket or folder at `path` is refused (the write
/// through a symlink is refused on purpose: replacing the link would silently leave its target
/// stale, and following it would write where the user did not name). A new file gets mode 0666
/// minus the umask; a replaced file keeps its mode. Throws ConfigError naming `path` on failure.
void write_file_atomically(const std::string& path, const std::string& content);

/// @brief Checks, before any long work, that write_file_atomically(path, ...) can succeed: the
/// folder exists and is writable, and nothing but a regular file sits at `path`. Throws
/// ConfigError naming `flag` and `path` otherwise. An empty `path` (flag not given) passes.
void check_output_path(const std::string& path, const std::string& flag);

}  // namespace common
