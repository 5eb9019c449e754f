// vLLM's --reasoning-parser qwen3: a chat answer that opens with <think>
// carries its thinking up to </think>, returned as reasoning_content, and the
// rest as content (Qwen3's templates with enable_thinking; DeepSeek-R1's
// layout is the same). An answer that does not open with <think> is all
// content (thinking disabled: the template put an empty think block in the
// prompt). The split is made on text, in a stream as its deltas arrive
// (holding back what may be the start of a tag), and the same way on a
// whole answer, so both forms agree; an answer cut off inside its thinking
// is all reasoning_content (vLLM's non-streaming parser would call it
// content, its stream reasoning).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hayate::server {

// The parsers --reasoning-parser takes.
inline constexpr const char* kReasoningParsers = "qwen3";

class ReasoningSplitter {
 public:
  struct Parts {
    std::string reasoning, content;
  };
  // The next delta of the answer: what is now known to be reasoning or content.
  Parts push(std::string_view text);
  // The end of the answer: whatever was held back.
  Parts finish();

  // A whole answer: reasoning_content (none when it did not open with
  // <think>) and content (none when nothing follows </think>).
  struct Split {
    std::optional<std::string> reasoning, content;
  };
  static Split split(std::string_view text);

 private:
  enum class Mode { kOpening, kReasoning, kContent };
  Mode mode_ = Mode::kOpening;
  bool opened_ = false;
  std::string held_;
};

}  // namespace hayate::server
