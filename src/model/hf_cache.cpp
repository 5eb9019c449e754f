#include "model/hf_cache.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace hayate {

namespace {

namespace fs = std::filesystem;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// One path component of a hub name or ref: no separators, never "." or "..".
bool plain_part(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
  for (char c : s)
    if (!name_char(c)) return false;
  return true;
}

// Whether `p` (canonical) lies inside `root` (canonical).
bool inside(const fs::path& p, const fs::path& root) {
  auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
  return r == root.end();
}

std::string fetch_hint(const std::string& repo_id, const std::string& revision) {
  return cat("hayate does not download models: fetch it with `hf download ", repo_id,
             revision == "main" ? "" : " --revision " + revision,
             "` (huggingface_hub), set HF_HOME or HF_HUB_CACHE to the cache that holds it, or "
             "pass --model a checkpoint directory");
}

}  // namespace

std::string hf_hub_cache_dir(const char* hf_hub_cache, const char* hf_home,
                             const char* xdg_cache_home, const char* home) {
  auto set = [](const char* v) { return v != nullptr && *v != '\0'; };
  if (set(hf_hub_cache)) return hf_hub_cache;
  if (set(hf_home)) return (fs::path(hf_home) / "hub").string();
  if (set(xdg_cache_home)) return (fs::path(xdg_cache_home) / "huggingface" / "hub").string();
  return (fs::path(set(home) ? home : "/") / ".cache" / "huggingface" / "hub").string();
}

bool looks_like_hub_id(const std::string& spec) {
  auto ok = [](const std::string& part) {
    return plain_part(part) && part.front() != '.' && part.front() != '-';
  };
  const size_t slash = spec.find('/');
  if (slash == std::string::npos) return ok(spec);
  if (slash != spec.rfind('/')) return false;  // at most one '/'
  return ok(spec.substr(0, slash)) && ok(spec.substr(slash + 1));
}

std::string resolve_hf_snapshot(const std::string& repo_id, const std::string& revision,
                                const std::string& cache_dir) {
  HAYATE_CHECK(looks_like_hub_id(repo_id), "--model '", repo_id,
               "' is neither a directory nor a Hugging Face repository id (ORG/NAME)");
  // A revision is a commit hash, a branch or a tag; tags and branches may
  // hold '/' (refs/pr/1), never "..".
  HAYATE_CHECK(!revision.empty() && revision.front() != '/', "--revision '", revision,
               "' is not a revision name");
  for (const fs::path& part : fs::path(revision))
    HAYATE_CHECK(plain_part(part.string()), "--revision '", revision,
                 "' is not a revision name (letters, digits, '-', '_', '.', '/')");

  std::string folder = "models--" + repo_id;
  if (size_t s = folder.find('/'); s != std::string::npos) folder.replace(s, 1, "--");
  const fs::path repo = fs::path(cache_dir) / folder;
  std::error_code ec;
  HAYATE_CHECK(fs::is_directory(repo, ec), "model '", repo_id,
               "' is not in the local Hugging Face cache (no ", repo.string(), "); ",
               fetch_hint(repo_id, revision));

  // refs/REVISION names the commit; a commit hash may also be given directly.
  std::string commit;
  const fs::path ref = repo / "refs" / revision;
  if (fs::is_regular_file(ref, ec)) {
    std::ifstream in(ref);
    std::getline(in, commit);
    while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r' ||
                               commit.back() == ' '))
      commit.pop_back();
    HAYATE_CHECK(plain_part(commit), ref.string(), ": not a commit name");
  } else if (plain_part(revision) && fs::is_directory(repo / "snapshots" / revision, ec)) {
    commit = revision;
  } else {
    fail(cat("model '", repo_id, "' has no revision '", revision, "' in the local Hugging Face "
             "cache (no ", ref.string(), "); ", fetch_hint(repo_id, revision)));
  }
  const fs::path snapshot = repo / "snapshots" / commit;
  HAYATE_CHECK(fs::is_directory(snapshot, ec), "model '", repo_id, "': the cache names commit ",
               commit, " but ", snapshot.string(), " is missing; ", fetch_hint(repo_id, revision));

  // Files of a snapshot are symlinks into ../../blobs: each must resolve, and
  // stay inside the repository's folder.
  const fs::path root = fs::canonical(repo, ec);
  HAYATE_CHECK(!ec, repo.string(), ": ", ec.message());
  const fs::path snap = fs::canonical(snapshot, ec);
  HAYATE_CHECK(!ec && inside(snap, root), snapshot.string(),
               ": the snapshot resolves outside its repository folder");
  for (auto it = fs::recursive_directory_iterator(snapshot, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    if (!it->is_symlink(ec)) continue;
    const fs::path target = fs::canonical(p, ec);
    HAYATE_CHECK(!ec, "model '", repo_id, "': ", p.string(),
                 " is a dangling symlink (an interrupted download?); ",
                 fetch_hint(repo_id, revision));
    HAYATE_CHECK(inside(target, root), "model '", repo_id, "': ", p.string(), " points to ",
                 target.string(), ", outside ", root.string(), "; refusing to load it");
  }
  HAYATE_CHECK(!ec, snapshot.string(), ": ", ec.message());
  return snapshot.string();
}

}  // namespace hayate
