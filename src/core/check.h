// Errors. One typed error for bad input or configuration, carrying the
// source location of the check that failed; device faults use
// HAYATE_CUDA_CHECK in src/cuda/launch.h.
#pragma once

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace hayate {

class Error : public std::runtime_error {
 public:
  Error(std::string message, std::source_location where = std::source_location::current())
      : std::runtime_error(std::move(message)), where_(where) {}
  const std::source_location& where() const { return where_; }

 private:
  std::source_location where_;
};

// Concatenates any streamable values into one string: cat("layer ", i, " of ", n).
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

[[noreturn]] inline void fail(std::string message,
                              std::source_location where = std::source_location::current()) {
  throw Error(std::move(message), where);
}

}  // namespace hayate

// HAYATE_CHECK(cond, "message parts", ...): throws hayate::Error when cond is
// false. It survives NDEBUG: use it for every check on input or config.
#define HAYATE_CHECK(cond, ...)                                       \
  do {                                                                \
    if (!(cond)) [[unlikely]] ::hayate::fail(::hayate::cat(__VA_ARGS__)); \
  } while (0)
