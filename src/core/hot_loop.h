// HAYATE_HOT_LOOP: a raw-pointer loop over a buffer its caller has sized,
// exempt from ASan and UBSan, whose per-element checks make the CPU
// backend's innermost loops (dot products, a draw over the vocabulary) ten
// times slower and the sanitizer test build minutes long, and (clang) from
// the fuzzing build's coverage counters, a shared byte per branch that
// OpenMP threads increment in turn. Everything around such a loop stays
// checked.
#pragma once

#if defined(__clang__)
#define HAYATE_HOT_LOOP __attribute__((no_sanitize("address", "undefined", "coverage")))
#else
#define HAYATE_HOT_LOOP __attribute__((no_sanitize("address", "undefined")))
#endif
