// The multi-host rendezvous on localhost: nodes as threads of this test.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "engine/rendezvous.h"

namespace hayate {
namespace {

// A port the kernel just handed out (free a moment ago).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(s);
  return ntohs(a.sin_port);
}

struct Outcome {
  std::string payload, error;
};

// Runs every config on its own thread; node 0's payload is `payload`.
std::vector<Outcome> run_nodes(const std::vector<RendezvousConfig>& nodes,
                               const std::string& payload) {
  std::vector<Outcome> out(nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nodes.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        out[i].payload = rendezvous(nodes[i], nodes[i].node_rank == 0 ? payload : "");
      } catch (const Error& e) {
        out[i].error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

std::vector<RendezvousConfig> cluster(int n, double timeout_s = 10.0) {
  const int port = free_port();
  std::vector<RendezvousConfig> nodes(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    nodes[size_t(r)] = {"127.0.0.1", port, n, r, "abc1234", timeout_s};
  return nodes;
}

TEST(Rendezvous, EveryNodeGetsNodeZerosPayload) {
  const std::string id("\x00\x01\xfe\xff nccl id\n", 14);  // any bytes, NUL and newline too
  auto nodes = cluster(4);
  std::swap(nodes[0], nodes[3]);  // node 0 need not start first
  for (const Outcome& o : run_nodes(nodes, id)) {
    EXPECT_EQ(o.error, "");
    EXPECT_EQ(o.payload, id);
  }
}

TEST(Rendezvous, ABuildMismatchFailsEveryNode) {
  auto nodes = cluster(2);
  nodes[1].build = "def5678";
  for (const Outcome& o : run_nodes(nodes, "id")) {
    EXPECT_NE(o.error.find("node 1 runs build def5678, node 0 runs abc1234"), std::string::npos)
        << o.error;
    EXPECT_EQ(o.payload, "");
  }
}

TEST(Rendezvous, TwoNodesClaimingOneRankFail) {
  auto nodes = cluster(3);
  nodes[2].node_rank = 1;
  const auto out = run_nodes(nodes, "id");
  EXPECT_NE(out[0].error.find("two nodes claim node rank 1"), std::string::npos) << out[0].error;
}

TEST(Rendezvous, AMissingNodeTimesOutInsteadOfHanging) {
  auto nodes = cluster(3, 0.5);
  nodes.pop_back();  // node 2 never comes
  const auto out = run_nodes(nodes, "id");
  EXPECT_NE(out[0].error.find("timed out after 0.5 s with 2 of 3 nodes"), std::string::npos)
      << out[0].error;
  EXPECT_NE(out[1].error.find("timed out"), std::string::npos) << out[1].error;
}

TEST(Rendezvous, NoNodeZeroIsAnErrorNamingTheAddress) {
  auto nodes = cluster(2, 0.3);
  const auto out = run_nodes({nodes[1]}, "");
  EXPECT_NE(out[0].error.find("could not reach node 0 at 127.0.0.1:"), std::string::npos)
      << out[0].error;
}

TEST(Rendezvous, OneNodeNeedsNoNetworkAndBadRanksAreRefused) {
  EXPECT_EQ(rendezvous({"unused", 1, 1, 0, "b", 1.0}, "id"), "id");
  EXPECT_THROW(rendezvous({"127.0.0.1", 1, 2, 2, "b", 1.0}), Error);
  EXPECT_THROW(rendezvous({"127.0.0.1", 1, 0, 0, "b", 1.0}), Error);
}

TEST(Rendezvous, ParsesHostPort) {
  EXPECT_EQ(parse_host_port("10.0.0.1:29500"), (std::pair<std::string, int>{"10.0.0.1", 29500}));
  EXPECT_EQ(parse_host_port("[::1]:80"), (std::pair<std::string, int>{"::1", 80}));
  EXPECT_EQ(parse_host_port("node-a:1").first, "node-a");
  for (const char* bad : {"node-a", ":1", "h:", "h:0", "h:65536", "h:12x", "h:99999999999"})
    EXPECT_THROW(parse_host_port(bad), Error) << bad;
}

}  // namespace
}  // namespace hayate
