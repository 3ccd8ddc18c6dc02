// Files that kiln reads and writes on behalf of a user who may be handed hostile paths: only
// regular files are read (checked without blocking, so a FIFO or a device never hangs a process),
// and kiln writes only into directories it owns, through temp files nobody can predict or
// redirect with a planted link.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

// A regular file opened for reading. Opening never blocks: the file is opened with O_NONBLOCK
// and checked with fstat before anything reads it.
class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  // Throws kiln::Error(User) "<path>: cannot open <what>: <reason>" (the reason says "is a FIFO,
  // not a regular file" and the like).
  ReadOnlyFile(const std::string& path, const std::string& what);
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& o) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& o) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // The same without throwing: false with the reason. follow_links false refuses a symlink.
  bool open(const std::string& path, std::string* why, bool follow_links = true);
  bool is_open() const { return fd_ >= 0; }
  uint64_t size() const { return size_; }
  // Reads exactly n bytes at `offset`; false on an error or a short read (the file shrank).
  bool read_at(uint64_t offset, void* buf, size_t n) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of a regular file. A user error "<path>: ..." naming `what` (e.g. "graph file") when
// it is not a regular file, cannot be read, or is larger than max_bytes.
std::string read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// Makes `dir` a directory kiln may write into: creates it (mode 0700, parents as needed) when
// missing, then refuses it when it is not a directory, is owned by another user, is
// world-writable without the sticky bit, or is not writable. follow_links false: `dir` itself
// must not be a symlink (for defaults in shared places such as /tmp). False with the reason.
bool prepare_private_dir(const std::string& dir, std::string* why, bool follow_links = true);

// 32 hex digits from the system's random source (getrandom): temp names nobody can predict.
std::string random_hex();

// Writes `data` to `path` atomically without following links: a temp file ".<name>.tmp.<random>"
// in the same directory, created with O_CREAT|O_EXCL|O_NOFOLLOW, then renamed over `path` (a
// link planted at `path` is replaced, its target left alone). False with the reason; the temp
// file is removed.
bool write_file_atomic(const std::string& path, std::string_view data, std::string* why);

}  // namespace kiln
