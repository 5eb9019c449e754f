// The connection loop and its bounded stream (connection.h says why).
#include "server/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/check.h"
#include "server/api_error.h"

namespace hayate::server {

namespace {

using Clock = std::chrono::steady_clock;

int millis_until(Clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return int(std::clamp<int64_t>(ms, 0, 1 << 30));
}

void address_of(int sock, bool remote, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int rc = remote ? getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                  : getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

const char* reason(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    default:
      return "Request Header Fields Too Large";
  }
}

}  // namespace

ConnectionStream::ConnectionStream(int sock, const HttpLimits& limits)
    : sock_(sock), limits_(limits), started_(Clock::now()) {}

bool ConnectionStream::is_readable() const {
  if (phase_ == Phase::kFailed) return false;
  if (buf_off_ < buf_.size()) return true;
  pollfd p{sock_, POLLIN, 0};
  return ::poll(&p, 1, int(limits_.read_timeout.count())) > 0;
}

bool ConnectionStream::peer_closed() const {
  if (buf_off_ < buf_.size()) return false;
  if (eof_) return true;
  pollfd p{sock_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char c;
  return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool ConnectionStream::is_writable() const {
  if (phase_ == Phase::kFailed || peer_closed()) return false;
  pollfd p{sock_, POLLOUT, 0};
  return ::poll(&p, 1, int(limits_.write_timeout.count())) > 0 && (p.revents & POLLOUT);
}

ssize_t ConnectionStream::fill(Clock::time_point deadline) {
  if (eof_) return 0;
  const Clock::time_point idle_end = Clock::now() + limits_.read_timeout;
  pollfd p{sock_, POLLIN, 0};
  int rc = ::poll(&p, 1, millis_until(std::min(deadline, idle_end)));
  if (rc < 0) return -1;
  if (rc == 0) {
    if (Clock::now() < deadline)
      refuse(408, cat("no bytes for ", limits_.read_timeout.count(), " ms"), "request_timeout");
    else if (phase_ == Phase::kHead)
      refuse(408,
             cat("the request head did not arrive within ", limits_.head_timeout.count(), " ms"),
             "request_timeout");
    else
      refuse(408, cat("the request did not arrive within ", limits_.request_timeout.count(), " ms"),
             "request_timeout");
    return -1;
  }
  if (buf_off_ == buf_.size()) {
    buf_.clear();
    buf_off_ = 0;
  }
  const size_t old = buf_.size();
  buf_.resize(old + 16384);
  ssize_t n = ::recv(sock_, buf_.data() + old, 16384, 0);
  buf_.resize(old + size_t(std::max<ssize_t>(n, 0)));
  if (n == 0) eof_ = true;
  return n;
}

// Hands out head bytes up to the end of the head, counting lines and bytes.
size_t ConnectionStream::take_head(char* ptr, size_t size) {
  size_t n = 0;
  while (n < size && buf_off_ < buf_.size()) {
    const char c = buf_[buf_off_++];
    ptr[n++] = c;
    ++head_bytes_;
    ++line_len_;
    if (c == '\n') {
      // httplib ends the head at a line that is exactly CRLF (after the
      // request line); lines ending in a bare LF are skipped by it.
      const bool blank = line_len_ == 2 && prev_cr_;
      line_len_ = 0;
      if (blank && head_lines_ > 0) {
        phase_ = Phase::kBody;
        break;
      }
      ++head_lines_;
    }
    prev_cr_ = c == '\r';
  }
  return n;
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (phase_ == Phase::kFailed) return -1;
  if (buf_off_ == buf_.size()) {
    const auto limit = phase_ == Phase::kHead ? limits_.head_timeout : limits_.request_timeout;
    ssize_t n = fill(started_ + limit);
    if (n <= 0) return n;
  }
  if (phase_ == Phase::kHead) {
    size_t n = take_head(ptr, size);
    if (head_bytes_ > limits_.max_head_bytes)
      refuse(431, cat("the request head is larger than ", limits_.max_head_bytes, " bytes"),
             "request_header_too_large");
    else if (head_lines_ > limits_.max_headers + 1)
      refuse(431, cat("the request has more than ", limits_.max_headers, " header lines"),
             "request_header_too_large");
    return phase_ == Phase::kFailed ? -1 : ssize_t(n);
  }
  size_t n = std::min(size, buf_.size() - buf_off_);
  std::copy_n(buf_.data() + buf_off_, n, ptr);
  buf_off_ += n;
  body_read_ += n;
  if (body_read_ > limits_.max_body_bytes + limits_.body_framing_slack) {
    refuse(413, cat("the request body is larger than ", limits_.max_body_bytes, " bytes"),
           "request_too_large");
    return -1;
  }
  return ssize_t(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (phase_ == Phase::kFailed) return -1;
  pollfd p{sock_, POLLOUT, 0};
  if (::poll(&p, 1, int(limits_.write_timeout.count())) <= 0) return -1;
  ssize_t n;
  do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n;
}

void ConnectionStream::refuse(int status, const std::string& message, const char* code) {
  if (phase_ == Phase::kFailed) return;
  phase_ = Phase::kFailed;
  const std::string body = ApiError(status, message, "", code).to_json().dump();
  const std::string out = cat("HTTP/1.1 ", status, " ", reason(status),
                              "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                              "\r\nConnection: close\r\n\r\n", body);
  pollfd p{sock_, POLLOUT, 0};
  if (::poll(&p, 1, int(limits_.write_timeout.count())) > 0)
    ::send(sock_, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  address_of(sock_, true, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  address_of(sock_, false, ip, port);
}

bool ConnectionStream::wait_for_request(std::chrono::milliseconds idle,
                                        const std::atomic<bool>& stop) {
  if (phase_ == Phase::kFailed) return false;
  if (buf_off_ < buf_.size()) return true;
  const Clock::time_point end = Clock::now() + idle;
  // Short polls, so a draining server closes idle connections promptly; a
  // request already sent is still read (and answered with 503).
  for (;;) {
    pollfd p{sock_, POLLIN, 0};
    int rc = ::poll(&p, 1, stop ? 0 : std::min(millis_until(end), 50));
    if (rc < 0 && errno != EINTR) return false;
    if (rc > 0) {
      char c;
      return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
    }
    if (stop || Clock::now() >= end) return false;
  }
}

void ConnectionStream::begin_request() {
  phase_ = Phase::kHead;
  started_ = Clock::now();
  head_bytes_ = head_lines_ = line_len_ = 0;
  prev_cr_ = false;
  body_read_ = body_length_ = 0;
  chunked_ = false;
}

void ConnectionStream::expect_body(uint64_t length, bool chunked) {
  body_length_ = length;
  chunked_ = chunked;
}

bool ConnectionStream::reusable() const {
  return phase_ != Phase::kFailed && !eof_ && !chunked_ && body_read_ == body_length_;
}

void ConnectionStream::close(bool linger) {
  ::shutdown(sock_, SHUT_WR);
  // Lingering close, bounded in time: what the client still sends (the rest
  // of a refused body or head) is read and dropped until it pauses for 200 ms
  // or 1 s has passed, so its kernel does not answer our close with a reset
  // that could discard the error response before the client reads it.
  const Clock::time_point end = Clock::now() + std::chrono::seconds(1);
  char sink[16384];
  while (linger) {
    pollfd p{sock_, POLLIN, 0};
    if (::poll(&p, 1, std::min(millis_until(end), 200)) <= 0) break;
    if (::recv(sock_, sink, sizeof sink, 0) <= 0) break;
  }
  ::close(sock_);
}

bool ConnectionStream::refused() const {
  return phase_ == Phase::kFailed;
}

void HttpServer::widen_backlog(int n) {
  int s = svr_sock_;
  if (s != INVALID_SOCKET) ::listen(s, n);
}

void HttpServer::stop_accepting() {
  draining_ = true;
  int s = svr_sock_;
  if (s != INVALID_SOCKET) ::shutdown(s, SHUT_RDWR);
}

const ConnectionStream* HttpServer::connection_of(const httplib::Request& req) const {
  std::lock_guard lock(serving_m_);
  auto it = serving_.find(&req);
  return it == serving_.end() ? nullptr : it->second;
}

void close_after_response(httplib::Request& req) {
  req.headers.erase("Connection");
  req.headers.emplace("Connection", "close");
}

bool HttpServer::process_and_close_socket(int sock) {
  ConnectionStream strm(sock, limits);
  const auto idle = std::chrono::seconds(keep_alive_timeout_sec_);
  bool ok = true;
  for (size_t served = 0; served < keep_alive_max_count_; ++served) {
    if (!strm.wait_for_request(idle, draining_)) break;
    strm.begin_request();
    const httplib::Request* current = nullptr;
    bool closed = false;
    bool close_after = false;
    ok = process_request(
        strm, served + 1 == keep_alive_max_count_, closed, [&](httplib::Request& req) {
          // A request without Content-Length or chunked framing has no body
          // (RFC 9112 6.3); the library would read until the client closes.
          const bool chunked =
              strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0;
          if (!chunked && !req.has_header("Content-Length")) req.set_header("Content-Length", "0");
          const std::string cl = req.get_header_value("Content-Length");
          char* end = nullptr;
          uint64_t length = std::strtoull(cl.c_str(), &end, 10);
          if (chunked) length = 0;
          strm.expect_body(length, chunked);
          // Chunked bodies may be refused half-read; HTTP/1.0 clients get
          // streams delimited by the connection's end.
          close_after =
              draining_ || chunked || length > limits.max_body_bytes || req.version == "HTTP/1.0";
          if (close_after) close_after_response(req);
          current = &req;
          std::lock_guard lock(serving_m_);
          serving_[&req] = &strm;
        });
    if (current) {
      std::lock_guard lock(serving_m_);
      serving_.erase(current);
    }
    // A request the library refused before its head was complete (400, 414)
    // leaves the stream in an unknown place: close.
    if (!ok || closed || close_after || !current || !strm.reusable() || draining_) break;
  }
  // Only a connection that stopped reading its request mid-way lingers.
  strm.close(strm.refused() || !strm.reusable());
  return ok;
}

}  // namespace hayate::server
