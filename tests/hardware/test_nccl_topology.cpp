// NCCL's channel setup (hardware/nccl_topology): the counts NCCL's logs show, derived by hand from
// its search (src/graph/search.cc) and setup (src/graph/connect.cc).
#include <doctest/doctest.h>

#include "hardware/collective_sweep.hpp"
#include "hardware/nccl_topology.hpp"

using namespace hardware;

TEST_CASE("DGX-A100, one node: 12 NVLinks x 20 GB/s = 240 GB/s -> 6 rings at 40, duplicated to 12 at 20, comm 24") {
  // SM80 speeds start at 40 GB/s: 240 / 40 = 6 channels fill the links exactly (search stops);
  // ncclTopoDupChannels doubles them at half speed (40 >= 25 on SM80); connect.cc doubles again.
  const auto t = nccl_topology(load_cluster("dgx-a100"), 1);
  CHECK(t.ring_graph_channels == 12);
  CHECK(t.ring_channel_GBps == doctest::Approx(20.0));
  CHECK(t.coll_channels == 24);
  CHECK(t.nvls_channels == 0);
}

TEST_CASE("DGX-H100, one node: 18 x 20.6 = 370.8 GB/s -> 6 rings at 60 (360), duplicated to 12 at 30, comm 24") {
  // 60 -> 6 channels (360), 50 -> 7 (350), 40 -> 9 (360), 30 -> 12 (360): none larger than the
  // first; 24 / 60 <= 0.49 ends the search. 60 >= 50 so SM90 duplicates: 12 at 30; 40 x 12 does not fit.
  const auto t = nccl_topology(load_cluster("dgx-h100"), 1);
  CHECK(t.ring_graph_channels == 12);
  CHECK(t.ring_channel_GBps == doctest::Approx(30.0));
  CHECK(t.coll_channels == 24);
  CHECK(t.nvls_channels == 16);
}

TEST_CASE("an H800-like node (8 NVLinks) gets 16 channels, as NCCL logs show (NVIDIA/nccl#892)") {
  auto c = load_cluster("dgx-h100");
  c.node.nvlink_links = 8;  // 164.8 GB/s: best 4 x 40 = 160; 40 < 50 but only 4 channels -> duplicated to 8 x 20
  const auto t = nccl_topology(c, 1);
  CHECK(t.ring_graph_channels == 8);
  CHECK(t.coll_channels == 16);
}

TEST_CASE("across nodes: one ring per NIC at NCCL's 48 GB/s inter-node speed, comm 16") {
  // 8 NICs x 1 ring at 48 = 384 >= 370.8: found; 48 < 50 with 8 > 4 channels: no duplication on SM90
  const auto h = nccl_topology(load_cluster("dgx-h100"), 4);
  CHECK(h.ring_graph_channels == 8);
  CHECK(h.ring_channel_GBps == doctest::Approx(48.0));
  CHECK(h.coll_channels == 16);
  // A100 with 200 Gb/s NICs (25 GB/s): 24 GB/s rings, one per NIC, 24 < 25: not duplicated
  const auto a = nccl_topology(load_cluster("dgx-a100"), 2);
  CHECK(a.ring_graph_channels == 8);
  CHECK(a.ring_channel_GBps == doctest::Approx(24.0));
  CHECK(a.coll_channels == 16);
}

TEST_CASE("a collective occupies the SMs of the channels it launches") {
  const auto c = load_cluster("dgx-h100");
  // 64 MB ring all-gather: all 24 channels; NVLS all-reduce: NVLS's 16
  const auto ag = collective_row(c, CollectiveOp{.kind = CollectiveKind::all_gather, .bytes = 64 << 20, .ranks = 8});
  CHECK(ag.algo == "ring");
  CHECK(ag.channels == 24);
  const auto ar = price_collective(c, CollectiveOp{.bytes = 256 << 20, .ranks = 8});
  CHECK(ar.algo == "nvls");
  CHECK(ar.sms == 16);
  // 64 KB ring LL all-gather: NCCL drops channels while bytes < channels x 512 threads x 8 B x 8 ranks
  // = 32 KB per channel -> 2 channels
  const auto small = collective_row(c, CollectiveOp{.kind = CollectiveKind::all_gather, .bytes = 64 << 10, .ranks = 8});
  CHECK(small.proto == "ll");
  CHECK(small.channels == 2);
}

TEST_CASE("across nodes NCCL's own estimate picks the algorithm: 4 DGX-H100, all-reduce moves to ring at ~261 MB") {
  // NCCL 2.24's tuner (tuning.cc), 4 nodes x 8 GPUs, graphs of 8 channels at 48 GB/s:
  //  NVLS-tree: 8 channels x min(48, 48 / 2) = 192 GB/s bus x 5/6 = 160 GB/s; latency 25 + 2 x log2(4) x 14 = 81 us
  //  ring/Simple: 8 x 48 = 384 GB/s bus x 32 / 62 = 198.2 GB/s; latency (8.4 + 56 x 3.4 + 6 x 14) x 1.4 = 395.9 us
  // equal at S = (395.9 - 81) / (1/160 - 1/198.2) x 1e3 = 261 MB: NVLS-tree below, ring above, whatever
  // the model prices each (it prices NVLS-tree faster at 256 MB: the measured curve's dip there).
  const auto c = load_cluster("dgx-h100");
  const CollectiveOp mid{.bytes = std::int64_t{128} << 20, .ranks = 32, .nodes = 4};
  CHECK(price_collective(c, mid).algo == "nvls_tree");
  const CollectiveOp below{.bytes = 255'000'000, .ranks = 32, .nodes = 4};
  CHECK(price_collective(c, below).algo == "nvls_tree");
  const CollectiveOp dip{.bytes = std::int64_t{256} << 20, .ranks = 32, .nodes = 4};
  const auto ring = price_collective(c, dip);
  CHECK(ring.algo == "ring");
  CHECK(ring.proto == "simple");
  // the model's own price of NVLS-tree at that size is lower than the ring NCCL picks
  const auto nvls_tree = price_collective(c, dip, {.algo = CollectiveAlgo::nvls_tree});
  CHECK(nvls_tree.total().s() < ring.total().s());
  // two nodes: NVLS-tree keeps its full NIC bandwidth (8 x 48 x 5/6 = 320 GB/s) and wins at every size
  CHECK(price_collective(c, {.bytes = std::int64_t{8} << 30, .ranks = 16, .nodes = 2}).algo == "nvls_tree");
  // inside a node the fastest priced pair still wins (NVLS at 256 MB, as before)
  CHECK(price_collective(c, {.bytes = std::int64_t{256} << 20, .ranks = 8}).algo == "nvls");
}
