#include "bridge/shell_words.hpp"

#include <fmt/format.h>

#include "common/config_reader.hpp"

namespace bridge {

ShellWords split_shell(const std::string& text, const std::string& source) {
  ShellWords out;
  std::string cur;
  bool in_word = false;
  int line = 1;
  auto flush = [&] {
    if (!in_word) return;
    const bool array_syntax = cur == ")" || (cur.size() > 2 && cur.ends_with("=(")) ||
                              (cur.starts_with("${") && cur.ends_with("[@]}")) || cur == "export" || cur == "\\";
    if (!array_syntax) out.words.push_back({cur, line});
    cur.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      if (text[i + 1] == '\n') {  // line continuation
        ++i;
        ++line;
        continue;
      }
      cur += text[++i];
      in_word = true;
      continue;
    }
    if (c == '\'' || c == '"') {
      const std::size_t close = text.find(c, i + 1);
      if (close == std::string::npos) throw common::ConfigError(source, fmt::format("line {}", line), fmt::format("unclosed {} quote", c));
      std::string quoted = text.substr(i + 1, close - i - 1);
      for (char q : quoted) line += q == '\n';
      cur += quoted;
      in_word = true;
      i = close;
      continue;
    }
    if (c == '#' && !in_word) {
      const std::size_t eol = std::min(text.find('\n', i), text.size());
      std::string comment = text.substr(i + 1, eol - i - 1);
      const auto b = comment.find_first_not_of(' ');
      if (b != std::string::npos && comment.compare(b, 10, "slicetune:") == 0) out.annotations.push_back(comment.substr(b + 10));
      i = eol - 1;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';') {
      flush();
      if (c == '\n') ++line;
      continue;
    }
    cur += c;
    in_word = true;
  }
  flush();
  return out;
}

}  // namespace bridge
