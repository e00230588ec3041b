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
