#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "core/mapped_file.h"

namespace hayate {
namespace {

namespace fs = std::filesystem;

TEST(MappedFile, MapsContentsAndMoves) {
  fs::path p = fs::temp_directory_path() / "hayate_mapped_file_test.bin";
  { std::ofstream(p, std::ios::binary) << "hello"; }
  MappedFile a(p.string());
  ASSERT_EQ(a.bytes().size(), 5u);
  EXPECT_EQ(a.bytes()[4], 'o');
  MappedFile b(std::move(a));
  EXPECT_EQ(b.bytes().size(), 5u);
  EXPECT_EQ(read_text_file(p.string()), "hello");
  fs::remove(p);
}

TEST(MappedFile, EmptyFileHasNoBytes) {
  fs::path p = fs::temp_directory_path() / "hayate_mapped_empty.bin";
  { std::ofstream(p, std::ios::binary); }
  MappedFile a(p.string());
  EXPECT_TRUE(a.bytes().empty());
  fs::remove(p);
}

TEST(MappedFile, MissingFileAndDirectoryAreErrorsNamingThePath) {
  try {
    MappedFile m("/nonexistent/dir/model.safetensors");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.safetensors"), std::string::npos);
  }
  EXPECT_THROW(MappedFile(fs::temp_directory_path().string()), Error);
  EXPECT_THROW(read_text_file("/nonexistent/config.json"), Error);
}

TEST(Check, CarriesMessageAndLocation) {
  try {
    HAYATE_CHECK(1 + 1 == 3, "value ", 42, " is bad");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "value 42 is bad");
    EXPECT_NE(std::string(e.where().file_name()).find("test_mapped_file.cpp"), std::string::npos);
  }
}

}  // namespace
}  // namespace hayate
