// `slicetune collective --json`: the nccl-tests-style sweep as scripts read it.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace {
std::string run(const std::string& args) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((std::string(SLICETUNE_BINARY) + " " + args).c_str(), "r"), pclose);
  REQUIRE(p);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  return out;
}
}  // namespace

TEST_CASE("slicetune collective --json: one row per doubling size with the nccl-tests fields") {
  // 1 KB .. 8 GB doubling = 2^10 .. 2^33: 24 rows; busbw = algbw x 2(n-1)/n = algbw x 1.75 at n = 8.
  const auto out = nlohmann::json::parse(run("collective --cluster dgx-h100 --op allreduce --gpus 8 --json"));
  CHECK(out.at("schema_version") == 1);
  const auto& rows = out.at("rows");
  REQUIRE(rows.is_array());
  REQUIRE(rows.size() == 24);
  CHECK(rows[0]["bytes"] == 1024);
  CHECK(rows[23]["bytes"] == (std::int64_t{8} << 30));
  for (const auto& r : rows) {
    for (const char* k : {"bytes", "time_us", "algbw_GBps", "busbw_GBps", "algo", "proto", "channels"}) CHECK(r.contains(k));
    CHECK(r["busbw_GBps"].get<double>() == doctest::Approx(r["algbw_GBps"].get<double>() * 1.75));
    CHECK(r["algbw_GBps"].get<double>() == doctest::Approx(r["bytes"].get<double>() / (r["time_us"].get<double>() * 1e3)));
  }
}

TEST_CASE("slicetune collective: a table with a units row") {
  const auto out = run("collective --cluster dgx-a100 --op allgather --gpus 8 --min-bytes 1M --max-bytes 4M");
  CHECK(out.find("busbw") != std::string::npos);
  CHECK(out.find("GB/s") != std::string::npos);
  CHECK(out.find("4194304") != std::string::npos);
}

TEST_CASE("slicetune collective --nodes 1,4 --json: a row per size and node count, the published busbw beside the 4-node rows") {
  // nccl-h100-busbw-1and4node.csv [VP] has the 4-node all-gather at 16 MB (69.74 GB/s) and 64 MB (166.39 GB/s)
  const auto out = nlohmann::json::parse(run("collective --cluster dgx-h100 --op allgather --nodes 1,4 --min-bytes 16M --max-bytes 64M "
                                             "--calibration " SLICETUNE_SOURCE_DIR "/data/calibration --json"));
  CHECK(out["schema_version"] == 1);
  const auto& rows = out["rows"];
  REQUIRE(rows.size() == 6);  // 16, 32, 64 MB x 1 and 4 nodes
  int with_measured = 0;
  for (const auto& r : rows) {
    CHECK(r["gpus"] == r["nodes"].get<int>() * 8);
    if (r.contains("measured_busbw_GBps")) {
      ++with_measured;
      CHECK(r["nodes"] == 4);
      // the bar of the 4-node curves: within 15 % at >= 16 MB
      CHECK(std::abs(r["busbw_GBps"].get<double>() / r["measured_busbw_GBps"].get<double>() - 1) <= 0.15);
    }
  }
  CHECK(with_measured == 2);
}

TEST_CASE("slicetune collective --nodes with a bad list names the flag") {
  CHECK(run("collective --nodes 1,x 2>&1").find("--nodes") != std::string::npos);
}
