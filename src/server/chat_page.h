// The chat page `hayate serve` answers GET / with (as llama-server does): one
// self-contained HTML file with its script, no build step and nothing
// fetched from elsewhere. It streams /v1/chat/completions with the page's
// sampling settings, keeps the conversation, and stops a reply on request
// (the aborted fetch closes the stream; the server aborts the generation).
#pragma once

#include <string_view>

namespace hayate::server {

std::string_view chat_page_html();

}  // namespace hayate::server
