// An error answered to a client in OpenAI's shape:
//   {"error": {"message": "...", "type": "...", "param": "...", "code": ...}}
// Request parsing throws ApiError; the HTTP layer turns it into a response
// with `status` (and Retry-After for 503).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace hayate::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {})
      : std::runtime_error(std::move(message)),
        status_(status),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

  // OpenAI's types: invalid_request_error (4xx), authentication_error (401),
  // server_error (5xx).
  std::string type() const {
    if (status_ == 401) return "authentication_error";
    if (status_ >= 500) return "server_error";
    return "invalid_request_error";
  }

  nlohmann::json to_json() const {
    nlohmann::json e = {{"message", what()}, {"type", type()}};
    e["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
    e["code"] = code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_);
    return {{"error", e}};
  }

 private:
  int status_;
  std::string param_;
  std::string code_;
};

// 400 naming the offending field.
inline ApiError bad_request(std::string message, std::string param = {}) {
  return ApiError(400, std::move(message), std::move(param));
}

// A request field's value, or nullptr when it is absent or JSON null
// (OpenAI's clients send null for "not set").
inline const nlohmann::json* field(const nlohmann::json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace hayate::server
