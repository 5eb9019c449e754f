// Helpers for the grammar tests: the Llama 3.1 vocabulary, random walks
// through the token mask (a random-weights model: uniform over the allowed
// tokens, EOS with some probability where allowed) and brute-force masks.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tok_test_util.h"

namespace hayate::test {

using grammar::GrammarMatcher;
using grammar::TokenTables;
using grammar::TokenVocab;

inline std::vector<int32_t> llama3_eos() {
  std::vector<int32_t> eos;
  for (const char* t : {"<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"})
    if (auto id = llama3().token_to_id(t)) eos.push_back(*id);
  return eos;
}

inline std::shared_ptr<const TokenVocab> llama3_vocab() {
  static const auto v = std::make_shared<const TokenVocab>(TokenVocab::from_tokenizer(llama3(), llama3_eos()));
  return v;
}

// Lazy tables: a walk builds only the positions it visits (fast under ASan).
inline std::shared_ptr<const TokenTables> tables_for(grammar::Grammar g,
                                                     std::shared_ptr<const TokenVocab> v = llama3_vocab(),
                                                     TokenTables::Build build = TokenTables::Build::kLazy) {
  return std::make_shared<const TokenTables>(std::make_shared<const grammar::Grammar>(std::move(g)), std::move(v),
                                             build);
}

inline bool bit(const std::vector<uint32_t>& m, int32_t id) { return (m[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1; }

struct Walk {
  std::string text;
  bool finished = false;
  int tokens = 0;
};

// Picks uniformly among the allowed tokens; takes EOS with probability
// p_eos when it is allowed (always when nothing else is). The allowed
// tokens are counted by popcount and the pick found by rank (EOS ids
// cleared from the mask first), not listed one by one: a JSON string
// position allows most of the 128k vocabulary, and listing it per step was
// most of the validity suites' time under ASan. The picks are those of
// listing them in id order.
inline Walk random_walk(const std::shared_ptr<const TokenTables>& t, uint64_t seed, int budget,
                        double p_eos = 0.3) {
  GrammarMatcher m(t);
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> mask;
  const TokenVocab& v = t->vocab();
  Walk w;
  for (; w.tokens < budget; ++w.tokens) {
    m.fill_mask(mask);
    bool eos = false;
    for (int32_t e : v.eos())
      if (bit(mask, e)) {
        eos = true;
        mask[static_cast<size_t>(e) >> 5] &= ~(1u << (e & 31));
      }
    size_t allowed = 0;
    for (uint32_t word : mask) allowed += static_cast<size_t>(__builtin_popcount(word));
    if (allowed == 0 && !eos) {
      ADD_FAILURE() << "dead end after " << w.text;
      return w;
    }
    if (eos && (allowed == 0 || std::uniform_real_distribution<double>(0, 1)(rng) < p_eos)) {
      EXPECT_TRUE(m.accept_token(v.eos()[0]));
      w.finished = true;
      return w;
    }
    size_t k = std::uniform_int_distribution<size_t>(0, allowed - 1)(rng);
    int32_t id = -1;
    for (size_t i = 0; i < mask.size(); ++i) {
      const auto n = static_cast<size_t>(__builtin_popcount(mask[i]));
      if (k >= n) {
        k -= n;
        continue;
      }
      uint32_t word = mask[i];
      for (; k > 0; --k) word &= word - 1;
      id = static_cast<int32_t>(i * 32 + static_cast<size_t>(__builtin_ctz(word)));
      break;
    }
    EXPECT_TRUE(m.accept_token(id)) << "masked-in token " << id << " rejected after " << w.text;
    w.text += v.bytes(id);
  }
  return w;
}

// The mask by its definition: the tokens accept_token accepts now.
inline std::vector<uint32_t> brute_mask(GrammarMatcher& m) {
  const TokenVocab& v = m.vocab();
  std::vector<uint32_t> out(v.mask_words(), 0);
  for (int32_t id = 0; id < v.size(); ++id)
    if (m.accept_token(id)) {
      out[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
      m.rollback(1);
    }
  return out;
}

}  // namespace hayate::test
