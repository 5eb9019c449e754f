// EXPECT_ERROR(statement, "substring"): the statement must throw
// hayate::Error whose one-line message contains the substring.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "core/check.h"

namespace hayate::test {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no hayate::Error thrown>";
}

}  // namespace hayate::test

#define EXPECT_ERROR(statement, substring)                                                 \
  do {                                                                                     \
    const std::string hayate_msg_ = ::hayate::test::error_of([&] { statement; });          \
    EXPECT_NE(hayate_msg_.find(substring), std::string::npos)                              \
        << "message: " << hayate_msg_ << "\nexpected to contain: " << (substring);         \
    EXPECT_EQ(hayate_msg_.find('\n'), std::string::npos) << "multi-line: " << hayate_msg_; \
  } while (0)
