// Models named as on the Hugging Face Hub (ORG/NAME), found offline in the
// local Hugging Face cache the way transformers and vLLM find them:
//   CACHE/models--ORG--NAME/refs/REVISION      holds the commit hash
//   CACHE/models--ORG--NAME/snapshots/COMMIT/  the files (symlinks into ../../blobs)
// Nothing is downloaded. A snapshot whose symlinks dangle or point outside
// the repository's folder is refused rather than loaded.
#pragma once

#include <string>

namespace hayate {

// The hub cache folder as huggingface_hub computes it from its environment
// variables (each may be null): HF_HUB_CACHE, else HF_HOME/hub, else
// XDG_CACHE_HOME/huggingface/hub, else HOME/.cache/huggingface/hub.
std::string hf_hub_cache_dir(const char* hf_hub_cache, const char* hf_home,
                             const char* xdg_cache_home, const char* home);

// True when `spec` reads as a hub repository id (NAME or ORG/NAME: letters,
// digits, '-', '_', '.'; no "..", not starting with '.' or '-').
bool looks_like_hub_id(const std::string& spec);

// The snapshot folder of `repo_id` at `revision` (a branch or tag under
// refs/, or a commit hash) in `cache_dir`. Throws Error saying where it
// looked and how to fetch the model when it is not there, or when the
// snapshot is unsafe (dangling or escaping symlinks, a ref that is not a
// plain commit name).
std::string resolve_hf_snapshot(const std::string& repo_id, const std::string& revision,
                                const std::string& cache_dir);

}  // namespace hayate
