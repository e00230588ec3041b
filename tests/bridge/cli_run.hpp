// defines: run_cli (the slicetune binary with arguments: exit status, stdout, stderr) for the bridge tests
#pragma once
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

struct CliRun {
  int rc = -1;
  std::string out, err;
};

inline CliRun run_cli(const std::string& args) {
  const auto err_path = std::filesystem::temp_directory_path() / ("slicetune-bridge-test-" + std::to_string(::getpid()) + ".err");
  const std::string cmd = std::string("cd '") + SLICETUNE_SOURCE_DIR + "' && '" + SLICETUNE_BINARY + "' " + args + " 2>'" + err_path.string() + "'";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 65536> buf;
  for (std::size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}
