// Unicode Normalization Form C (the NFC normalizer of tokenizer.json, which
// Qwen's tokenizers use): canonical decomposition, canonical ordering, then
// canonical composition, as UAX #15 defines them.
#pragma once

#include <string>
#include <string_view>

namespace hayate::unicode {

// NFC of valid UTF-8 text. Text whose code points are all below U+0300
// (ASCII, Latin-1) is already in NFC and comes back as it is.
std::string nfc(std::string_view s);

}  // namespace hayate::unicode
