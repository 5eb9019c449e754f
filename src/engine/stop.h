// Stop strings over streamed text. Text is pushed as it becomes final; the
// matcher passes on only what can no longer be part of a stop string, holding
// back any tail that could be the start of one, so a stop string never leaks
// out partially. The batching engine keeps one matcher per sequence.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hayate {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);  // empty strings are rejected

  // Adds text; returns the part that is now safe to emit. After a stop string
  // appears, returns the text before it and stopped() turns true; later calls
  // return nothing.
  std::string push(std::string_view text);
  // At the end of generation: returns the held-back tail (nothing if stopped).
  std::string flush();

  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string that matched

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace hayate
