// Hugging Face cache resolution (model/hf_cache.h) on caches laid out as
// huggingface_hub writes them: refs/, snapshots/ of symlinks into blobs/.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "model/expect_error.h"
#include "model/hf_cache.h"
#include "model/st_writer.h"

namespace hayate {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* kOther = "fedcba9876543210fedcba9876543210fedcba98";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// CACHE/models--org--tiny with refs/main -> kCommit and refs/v2 -> kOther,
// each snapshot's config.json a relative symlink into blobs/.
struct Cache {
  TempDir dir{"hfcache"};
  fs::path repo = fs::path(dir.path()) / "models--org--tiny";
  Cache() {
    write(repo / "refs" / "main", std::string(kCommit) + "\n");
    write(repo / "refs" / "v2", kOther);
    write(repo / "blobs" / "aaaa", "{\"main\": true}");
    write(repo / "blobs" / "bbbb", "{\"v2\": true}");
    fs::create_directories(repo / "snapshots" / kCommit);
    fs::create_directories(repo / "snapshots" / kOther);
    fs::create_symlink("../../blobs/aaaa", repo / "snapshots" / kCommit / "config.json");
    fs::create_symlink("../../blobs/bbbb", repo / "snapshots" / kOther / "config.json");
  }
  fs::path snapshot(const char* c) const { return repo / "snapshots" / c; }
};

TEST(HfCache, CacheDirFollowsHuggingfaceHubPrecedence) {
  EXPECT_EQ(hf_hub_cache_dir("/a", "/b", "/c", "/d"), "/a");
  EXPECT_EQ(hf_hub_cache_dir(nullptr, "/b", "/c", "/d"), "/b/hub");
  EXPECT_EQ(hf_hub_cache_dir("", "/b", "/c", "/d"), "/b/hub");
  EXPECT_EQ(hf_hub_cache_dir(nullptr, nullptr, "/c", "/d"), "/c/huggingface/hub");
  EXPECT_EQ(hf_hub_cache_dir(nullptr, nullptr, nullptr, "/d"), "/d/.cache/huggingface/hub");
}

TEST(HfCache, HubIds) {
  for (const char* ok : {"meta-llama/Llama-3.1-8B-Instruct", "gpt2", "tokyotech-llm/Llama-3.1-Swallow-8B-Instruct-v0.3", "a_b/c.d"})
    EXPECT_TRUE(looks_like_hub_id(ok)) << ok;
  for (const char* bad : {"", "a/b/c", "../x", "a/..", "/abs", "a/", ".hidden/x", "a b/c", "-x/y"})
    EXPECT_FALSE(looks_like_hub_id(bad)) << bad;
}

TEST(HfCache, ResolvesRefsMainRevisionsAndCommits) {
  Cache c;
  EXPECT_EQ(fs::path(resolve_hf_snapshot("org/tiny", "main", c.dir.path())), c.snapshot(kCommit));
  EXPECT_EQ(fs::path(resolve_hf_snapshot("org/tiny", "v2", c.dir.path())), c.snapshot(kOther));
  EXPECT_EQ(fs::path(resolve_hf_snapshot("org/tiny", kOther, c.dir.path())), c.snapshot(kOther));
}

TEST(HfCache, AbsentModelOrRevisionSaysHowToFetchIt) {
  Cache c;
  EXPECT_ERROR(resolve_hf_snapshot("org/other", "main", c.dir.path()), "hf download org/other");
  EXPECT_ERROR(resolve_hf_snapshot("org/other", "main", c.dir.path()), "models--org--other");
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "v3", c.dir.path()), "no revision 'v3'");
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "v3", c.dir.path()), "--revision v3");
  fs::remove_all(c.snapshot(kCommit));
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "main", c.dir.path()), "is missing");
}

TEST(HfCache, DanglingSymlinkIsRefused) {
  Cache c;
  fs::remove(c.repo / "blobs" / "aaaa");  // an interrupted download
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "main", c.dir.path()), "dangling symlink");
}

TEST(HfCache, SymlinkOutsideTheRepositoryIsRefused) {
  Cache c;
  TempDir elsewhere("hfcache_out");
  write(fs::path(elsewhere.path()) / "secret", "x");
  fs::create_symlink(fs::path(elsewhere.path()) / "secret",
                     c.snapshot(kCommit) / "model.safetensors");
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "main", c.dir.path()), "outside");
  // Through a relative path climbing out of the cache, and in a subfolder.
  Cache d;
  fs::create_directories(d.snapshot(kCommit) / "sub");
  fs::create_symlink("../../../../../../../../../../../../etc/passwd",
                     d.snapshot(kCommit) / "sub" / "x");
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "main", d.dir.path()), "outside");
}

TEST(HfCache, RefsAndRevisionsCannotEscape) {
  Cache c;
  write(c.repo / "refs" / "evil", "../../../../tmp");
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "evil", c.dir.path()), "not a commit name");
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "../refs/main", c.dir.path()), "not a revision name");
  EXPECT_ERROR(resolve_hf_snapshot("org/tiny", "/etc", c.dir.path()), "not a revision name");
  EXPECT_ERROR(resolve_hf_snapshot("../x", "main", c.dir.path()), "Hugging Face repository id");
}

}  // namespace
}  // namespace hayate
