// One client connection, read and written by the server's own keep-alive
// loop instead of cpp-httplib's (0.11.4, Debian 12). The library parses each
// request; this layer bounds what it is given and when:
//   - the request head (request line + headers) has a byte limit, a header
//     count limit and a deadline from its first byte, so neither a header
//     bomb nor a client dribbling one byte per second holds memory or a
//     thread (the library reads lines of any length, any number of them);
//   - the body, as sent (chunked framing or compression included), has a byte
//     limit and a deadline; the decoded size is bounded where it is read
//     (OpenAIServer's body reader), since the library inflates without one;
//   - one buffered stream lives as long as the connection, so pipelined
//     requests are not lost with a per-request buffer (the library's
//     SocketStream is made anew for each request and drops read-ahead bytes);
//   - a server that is draining answers the request in progress with
//     "Connection: close" and closes idle connections at once;
//   - a request whose body was not read to its end (refused early: 401,
//     413) closes the connection, so body bytes are never parsed as a request.
// When a limit is hit the stream writes the error response itself (408, 413
// or 431 with an OpenAI error body) and then fails every read and write, so
// the library gives up on the request.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include <httplib.h>

namespace hayate::server {

// httplib answers req with "Connection: close" (it does so for a request
// that asks for it): for a request whose connection closes after its response.
void close_after_response(httplib::Request& req);

// The limits every connection is held to; docs/api.md lists them.
struct HttpLimits {
  size_t max_head_bytes = 32u << 10;  // request line and headers together
  size_t max_headers = 100;           // header lines
  // From the first byte of a request to the end of its head.
  std::chrono::milliseconds head_timeout{10000};
  size_t max_body_bytes = 16u << 20;  // after decoding (chunked, gzip, deflate, br)
  // Bytes of a body as sent may exceed the decoded limit by this much
  // (chunk-size lines), and never more.
  size_t body_framing_slack = 1u << 20;
  // From the first byte of a request to the last byte of its body.
  std::chrono::milliseconds request_timeout{60000};
  std::chrono::milliseconds read_timeout{10000};  // between two reads
  std::chrono::milliseconds write_timeout{5000};  // for one write to make progress
};

class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int sock, const HttpLimits& limits);

  bool is_readable() const override;
  // Writable and the peer has not closed: streaming responses poll this to
  // notice a client that went away.
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return sock_; }

  // Waits up to `idle` for the first byte of another request (buffered bytes
  // of a pipelined one count); false on close, error, timeout, or `stop`.
  bool wait_for_request(std::chrono::milliseconds idle, const std::atomic<bool>& stop);
  // A new request starts: its head accounting and deadlines.
  void begin_request();
  // The request's declared body: `length` bytes, or chunked (read to its
  // terminating chunk; the stream cannot tell whether that happened).
  void expect_body(uint64_t length, bool chunked);
  // Whether the connection can serve another request after this one.
  bool reusable() const;
  // The client closed its end (nothing more to read and EOF pending).
  bool peer_closed() const;
  // A limit was hit: the stream wrote the error response itself.
  bool refused() const;
  // Ends the connection: stops writing; with `linger`, reads and drops what
  // the client is still sending for a short bounded time (so it sees the
  // response rather than a reset); closes the socket.
  void close(bool linger);

 private:
  enum class Phase { kHead, kBody, kFailed };
  using Clock = std::chrono::steady_clock;

  ssize_t fill(Clock::time_point deadline);  // reads from the socket into buf_
  void refuse(int status, const std::string& message, const char* code);
  size_t take_head(char* ptr, size_t size);

  int sock_;
  const HttpLimits& limits_;
  std::string buf_;  // bytes read from the socket and not yet handed out
  size_t buf_off_ = 0;
  bool eof_ = false;

  Phase phase_ = Phase::kHead;
  Clock::time_point started_;
  size_t head_bytes_ = 0;
  size_t head_lines_ = 0;
  size_t line_len_ = 0;
  bool prev_cr_ = false;
  uint64_t body_read_ = 0;
  uint64_t body_length_ = 0;
  bool chunked_ = false;
};

// httplib::Server with the connection loop above and three additions that
// need its protected members.
class HttpServer : public httplib::Server {
 public:
  HttpLimits limits;

  // The library listens with a backlog of 5; hundreds of clients connecting at
  // once would see dropped SYNs and 1 s retries. Linux lets listen() be called
  // again on a listening socket to enlarge it.
  void widen_backlog(int n);
  // Shuts the listening socket down without closing it: accept() fails, the
  // accept loop ends, closes it and joins the connection threads, while
  // responses in progress run to their end (stop() would cut streams short:
  // httplib ends chunked responses once the socket is marked invalid). From
  // now on every response closes its connection and idle ones close at once.
  void stop_accepting();

  // The connection serving `req` (nullptr outside a handler): handlers use it
  // to notice a client that went away while they wait.
  const ConnectionStream* connection_of(const httplib::Request& req) const;

 private:
  bool process_and_close_socket(int sock) override;

  std::atomic<bool> draining_{false};
  mutable std::mutex serving_m_;
  std::unordered_map<const httplib::Request*, const ConnectionStream*> serving_;
};

}  // namespace hayate::server
