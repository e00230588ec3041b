#include "bridge/nccl_tests.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "common/config_reader.hpp"

namespace bridge {

namespace {

std::optional<hardware::CollectiveKind> kind_from(const std::string& s) {
  if (s.find("all_reduce") != std::string::npos || s.find("allreduce") != std::string::npos) return hardware::CollectiveKind::all_reduce;
  if (s.find("all_gather") != std::string::npos || s.find("allgather") != std::string::npos) return hardware::CollectiveKind::all_gather;
  if (s.find("reduce_scatter") != std::string::npos || s.find("reducescatter") != std::string::npos)
    return hardware::CollectiveKind::reduce_scatter;
  if (s.find("alltoall") != std::string::npos || s.find("all_to_all") != std::string::npos) return hardware::CollectiveKind::all_to_all;
  return std::nullopt;
}

std::vector<std::string> fields(const std::string& line) {
  std::istringstream is(line);
  std::vector<std::string> f;
  for (std::string w; is >> w;) f.push_back(w);
  return f;
}

}  // namespace

NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& source) {
  NcclTestsRun run;
  run.source = source;
  std::optional<hardware::CollectiveKind> kind;
  std::set<std::string> hosts;
  std::istringstream in(text);
  int n = 0;
  bool header = false;
  auto fail = [&](int line, const std::string& what) { throw common::ConfigError(source, fmt::format("line {}", line), what); };
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find("# nThread") != std::string::npos) header = true;
    if (auto p = line.find("Collective test starting:"); p != std::string::npos) kind = kind_from(line.substr(p));
    if (auto p = line.find("NCCL_ALGO set by environment to"); p != std::string::npos) {
      std::string a = fields(line.substr(p + 31)).empty() ? "" : fields(line.substr(p + 31))[0];
      std::transform(a.begin(), a.end(), a.begin(), [](unsigned char c) { return std::tolower(c); });
      hardware::CollectiveAlgo algo;
      if (!hardware::parse_collective_algo(a, algo)) fail(n, fmt::format("NCCL_ALGO '{}' is not one slicetune models", a));
      run.forced_algo = algo;
    }
    if (line.rfind("#  Rank", 0) == 0 || line.rfind("# Rank", 0) == 0) {
      const auto f = fields(line);
      ++run.ranks;
      for (std::size_t i = 0; i + 1 < f.size(); ++i)
        if (f[i] == "on") hosts.insert(f[i + 1]);
      if (auto p = line.find(']'); p != std::string::npos && run.device.empty()) {
        run.device = line.substr(p + 1);
        run.device.erase(0, run.device.find_first_not_of(' '));
      }
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const auto f = fields(line);
    if (f.empty()) continue;
    // size count type redop root | time algbw busbw #wrong (out-of-place) | time algbw busbw #wrong (in-place)
    if (f.size() != 13) {
      if (std::isdigit(static_cast<unsigned char>(f[0][0])))
        fail(n, fmt::format("expected 13 columns (size count type redop root, then time algbw busbw #wrong out-of-place and in-place), got {}", f.size()));
      continue;  // NCCL INFO lines and other chatter
    }
    auto num = [&](const std::string& s, const char* what) {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (end == s.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) fail(n, fmt::format("{}: expected a number >= 0, got '{}'", what, s));
      return v;
    };
    NcclTestsRow r;
    const double bytes = num(f[0], "size");
    if (bytes != std::floor(bytes) || bytes > 9.0e18) fail(n, fmt::format("size: expected a whole number of bytes, got '{}'", f[0]));
    r.bytes = static_cast<std::int64_t>(bytes);
    r.time_us = num(f[9], "in-place time");
    r.algbw_GBps = num(f[10], "in-place algbw");
    r.busbw_GBps = num(f[11], "in-place busbw");
    r.line = n;
    if (r.bytes > 0 && r.time_us <= 0) fail(n, "in-place time must be > 0");
    run.rows.push_back(r);
  }
  if (!header) throw common::ConfigError(source, "", "not nccl-tests output (no \"# nThread ... nGpus ...\" header line)");
  if (!kind) kind = kind_from(source);
  if (!kind)
    throw common::ConfigError(source, "", "which collective? no \"# Collective test starting:\" line and the file name does not say "
                                          "(all_reduce / all_gather / reduce_scatter / alltoall)");
  run.kind = *kind;
  if (run.ranks == 0) throw common::ConfigError(source, "", "no \"#  Rank N ... on HOST device ...\" lines: cannot tell how many GPUs ran");
  run.nodes = std::max<int>(1, static_cast<int>(hosts.size()));
  if (run.ranks % run.nodes) throw common::ConfigError(source, "", fmt::format("{} ranks on {} hosts: not the same number per node", run.ranks, run.nodes));
  if (run.rows.empty()) throw common::ConfigError(source, "", "no result rows");
  return run;
}

}  // namespace bridge
