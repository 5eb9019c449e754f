// A read-only memory-mapped file (RAII). Checkpoints are mapped, never read
// into owned buffers, so an 8B model loads without a 16 GB copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hayate {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws Error naming the file
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) text file; throws Error naming the file.
std::string read_text_file(const std::string& path);

}  // namespace hayate
