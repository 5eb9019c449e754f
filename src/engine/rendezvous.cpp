#include "engine/rendezvous.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "core/check.h"

namespace hayate {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kHello = "hayate-rendezvous/1";
constexpr size_t kMaxLine = 1 << 16;

// Closes a socket on every path.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? int(left.count()) : 0;
}

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {d[c >> 4], d[c & 15]};
  return out;
}

std::string unhex(const std::string& s) {
  HAYATE_CHECK(s.size() % 2 == 0, "rendezvous: a malformed payload from node 0");
  const auto v = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    fail("rendezvous: a malformed payload from node 0");
  };
  std::string out;
  for (size_t i = 0; i < s.size(); i += 2) out.push_back(char(v(s[i]) << 4 | v(s[i + 1])));
  return out;
}

void send_line(int fd, const std::string& line) {
  const std::string msg = line + "\n";
  for (size_t off = 0; off < msg.size();) {
    const ssize_t n = ::send(fd, msg.data() + off, msg.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the peer left: it has its own error or timeout
    off += size_t(n);
  }
}

// One line (without its newline) before the deadline; empty optional-like
// result via ok = false when the peer closed or the time ran out.
bool recv_line(int fd, Clock::time_point deadline, std::string& line) {
  line.clear();
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms_left(deadline)) <= 0) return false;
    char c;
    if (::recv(fd, &c, 1, 0) != 1) return false;
    if (c == '\n') return true;
    if (line.size() >= kMaxLine) return false;
    line.push_back(c);
  }
}

addrinfo* resolve(const RendezvousConfig& c, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(c.port);
  const int rc = ::getaddrinfo(c.host.c_str(), port.c_str(), &hints, &res);
  HAYATE_CHECK(rc == 0 && res, "--dist-init-addr ", c.host, ":", c.port, ": ", ::gai_strerror(rc));
  return res;
}

std::string where(const RendezvousConfig& c) { return cat(c.host, ":", c.port); }

std::string serve(const RendezvousConfig& c, const std::string& payload, Clock::time_point deadline) {
  addrinfo* res = resolve(c, true);
  Fd server;
  for (addrinfo* a = res; a && server.fd < 0; a = a->ai_next) {
    Fd s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (s.fd < 0) continue;
    const int one = 1;
    ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.fd, 64) == 0) server = std::move(s);
  }
  ::freeaddrinfo(res);
  HAYATE_CHECK(server.fd >= 0, "rendezvous: node 0 cannot listen on ", where(c), ": ",
               std::strerror(errno));

  std::vector<Fd> peers;
  std::vector<bool> seen(size_t(c.nnodes), false);
  seen[0] = true;
  std::string error;
  int arrived = 1;
  while (arrived < c.nnodes && error.empty()) {
    pollfd p{server.fd, POLLIN, 0};
    if (::poll(&p, 1, ms_left(deadline)) <= 0) {
      error = cat("rendezvous at ", where(c), " timed out after ", c.timeout_s, " s with ",
                  arrived, " of ", c.nnodes, " nodes");
      break;
    }
    Fd peer(::accept(server.fd, nullptr, nullptr));
    if (peer.fd < 0) continue;
    std::string line;
    if (!recv_line(peer.fd, deadline, line)) continue;  // not a node, or gone
    std::istringstream in(line);
    std::string tag, build;
    int rank = -1;
    in >> tag >> rank >> build;
    if (tag != kHello) continue;  // something else knocked on the port
    if (build != c.build) {
      error = cat("rendezvous: node ", rank, " runs build ", build, ", node 0 runs ", c.build,
                  " (every node needs the same build)");
    } else if (rank < 1 || rank >= c.nnodes) {
      error = cat("rendezvous: node rank ", rank, " is outside [1, ", c.nnodes, ")");
    } else if (seen[size_t(rank)]) {
      error = cat("rendezvous: two nodes claim node rank ", rank);
    } else {
      seen[size_t(rank)] = true;
      ++arrived;
    }
    peers.push_back(std::move(peer));
  }
  const std::string answer = error.empty() ? cat("ok ", hex(payload)) : cat("error ", error);
  for (const Fd& p : peers) send_line(p.fd, answer);
  HAYATE_CHECK(error.empty(), error);
  return payload;
}

std::string join(const RendezvousConfig& c, Clock::time_point deadline) {
  std::string last_error = "nothing answered";
  while (ms_left(deadline) > 0) {
    addrinfo* res = resolve(c, false);
    Fd s;
    for (addrinfo* a = res; a && s.fd < 0; a = a->ai_next) {
      Fd t(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (t.fd >= 0 && ::connect(t.fd, a->ai_addr, a->ai_addrlen) == 0) s = std::move(t);
      else last_error = std::strerror(errno);
    }
    ::freeaddrinfo(res);
    if (s.fd < 0) {  // node 0 may not listen yet
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_left(deadline))));
      continue;
    }
    send_line(s.fd, cat(kHello, " ", c.node_rank, " ", c.build));
    std::string line;
    HAYATE_CHECK(recv_line(s.fd, deadline, line), "rendezvous at ", where(c), ": node 0 did not ",
                 "answer node ", c.node_rank, " within ", c.timeout_s, " s");
    if (line.rfind("ok ", 0) == 0) return unhex(line.substr(3));
    HAYATE_CHECK(line.rfind("error ", 0) != 0, line.substr(6));
    fail(cat("rendezvous at ", where(c), ": a malformed answer from node 0"));
  }
  fail(cat("rendezvous: node ", c.node_rank, " could not reach node 0 at ", where(c), " within ",
           c.timeout_s, " s (", last_error, ")"));
}

}  // namespace

std::pair<std::string, int> parse_host_port(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  HAYATE_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < addr.size(),
               "--dist-init-addr '", addr, "' is not HOST:PORT");
  std::string host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  for (char ch : addr.substr(colon + 1)) {
    HAYATE_CHECK(ch >= '0' && ch <= '9' && port < 65536, "--dist-init-addr '", addr,
                 "': the port is not a number in [1, 65535]");
    port = port * 10 + (ch - '0');
  }
  HAYATE_CHECK(port >= 1 && port <= 65535, "--dist-init-addr '", addr,
               "': the port is not a number in [1, 65535]");
  return {host, port};
}

std::string rendezvous(const RendezvousConfig& c, const std::string& payload) {
  HAYATE_CHECK(c.nnodes >= 1, "--nnodes must be >= 1, got ", c.nnodes);
  HAYATE_CHECK(c.node_rank >= 0 && c.node_rank < c.nnodes, "--node-rank ", c.node_rank,
               " is outside [0, ", c.nnodes, ")");
  HAYATE_CHECK(!c.build.empty() && c.build.find_first_of(" \n") == std::string::npos,
               "rendezvous: the build identity must be one word");
  if (c.nnodes == 1) return payload;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(int64_t(c.timeout_s * 1000.0));
  return c.node_rank == 0 ? serve(c, payload, deadline) : join(c, deadline);
}

}  // namespace hayate
