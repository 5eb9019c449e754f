// How the nodes of a multi-host run find each other before their
// communicator exists: node 0 listens on --dist-init-addr HOST:PORT, every
// other node connects and says who it is (its node rank and its build), and
// node 0 answers all of them with one payload (NCCL's unique id) once every
// node has arrived. A build mismatch, a rank twice or out of range, or a node
// missing at the deadline ends the rendezvous with the same one-line error
// on every node that is there, so no rank waits forever.
#pragma once

#include <string>
#include <utility>

namespace hayate {

struct RendezvousConfig {
  std::string host;  // node 0's address
  int port = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string build;       // this binary's identity (commit); must match on every node
  double timeout_s = 60.0;  // for the whole rendezvous, connecting included
};

// "HOST:PORT" (a name, an IPv4 address, or [IPv6]) into its parts; throws
// Error naming --dist-init-addr when it is not of that form.
std::pair<std::string, int> parse_host_port(const std::string& addr);

// Every node calls it; node 0 passes the payload (any bytes), the others
// receive it. Returns the payload. Throws Error as said above.
std::string rendezvous(const RendezvousConfig& config, const std::string& payload = {});

}  // namespace hayate
