#include "server/reasoning.h"

#include <algorithm>

namespace hayate::server {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ReasoningSplitter::Parts ReasoningSplitter::push(std::string_view text) {
  Parts out;
  held_ += text;
  if (mode_ == Mode::kOpening) {
    const size_t n = std::min(held_.size(), kOpen.size());
    if (held_.compare(0, n, kOpen.substr(0, n)) != 0) {
      mode_ = Mode::kContent;  // did not open with <think>
    } else if (held_.size() < kOpen.size()) {
      return out;  // still a prefix of <think>
    } else {
      held_.erase(0, kOpen.size());
      mode_ = Mode::kReasoning;
      opened_ = true;
    }
  }
  if (mode_ == Mode::kReasoning) {
    const size_t at = held_.find(kClose);
    if (at == std::string::npos) {
      const size_t keep = partial_tag(held_, kClose);
      out.reasoning = held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.reasoning = held_.substr(0, at);
    held_.erase(0, at + kClose.size());
    mode_ = Mode::kContent;
  }
  out.content += held_;
  held_.clear();
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::finish() {
  Parts out;
  if (mode_ == Mode::kReasoning)
    out.reasoning = std::move(held_);
  else
    out.content = std::move(held_);  // kOpening: a prefix of <think> and nothing more
  held_.clear();
  mode_ = Mode::kContent;
  return out;
}

ReasoningSplitter::Split ReasoningSplitter::split(std::string_view text) {
  ReasoningSplitter s;
  Parts a = s.push(text);
  const bool opened = s.opened_;
  Parts b = s.finish();
  Split out;
  if (opened) {
    out.reasoning = a.reasoning + b.reasoning;
    if (!(a.content + b.content).empty()) out.content = a.content + b.content;
  } else {
    out.content = a.content + b.content;
  }
  return out;
}

}  // namespace hayate::server
