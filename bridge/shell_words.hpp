// defines: bridge::ShellLine, split_shell (a launch script or argument list as shell words)
#pragma once
#include <string>
#include <vector>

namespace bridge {

/// @brief One word of a launch script with the comment that followed it on its line.
struct ShellWord {
  std::string text;
  int line = 0;
};

/// @brief The words of `text` as a POSIX shell would split them (single and double quotes,
/// backslash escapes and line continuations), with comments removed. Comment lines starting
/// with "# slicetune:" are returned in `annotations` (without the prefix). Words of the bash
/// array syntax (`name=(`, `)`, `"${name[@]}"`) are dropped. `export` is dropped; VAR=value
/// words before the command are assignments. Throws common::ConfigError on an unclosed quote.
struct ShellWords {
  std::vector<ShellWord> words;
  std::vector<std::string> annotations;
};
ShellWords split_shell(const std::string& text, const std::string& source);

}  // namespace bridge
