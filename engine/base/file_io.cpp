#include "engine/base/file_io.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "engine/base/check.hpp"

namespace fs = std::filesystem;

namespace kiln {

namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

// What a non-regular file is, for "is a FIFO, not a regular file".
const char* file_kind(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a plain file";
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

ReadOnlyFile::ReadOnlyFile(const std::string& path, const std::string& what) {
  std::string why;
  KILN_CHECK(open(path, &why), "{}: cannot open {}: {}", path, what, why);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& o) noexcept : fd_(o.fd_), size_(o.size_) {
  o.fd_ = -1;
}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    size_ = o.size_;
    o.fd_ = -1;
  }
  return *this;
}

bool ReadOnlyFile::open(const std::string& path, std::string* why, bool follow_links) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  size_ = 0;
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    int e = errno;
    *why = e == ELOOP && !follow_links ? "is a symbolic link, not a regular file" : errno_text(e);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *why = errno_text(errno);
    ::close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = fmt::format("is {}, not a regular file", file_kind(st.st_mode));
    ::close(fd);
    return false;
  }
  fd_ = fd;
  size_ = static_cast<uint64_t>(st.st_size);
  return true;
}

bool ReadOnlyFile::read_at(uint64_t offset, void* buf, size_t n) const {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

std::string read_regular_file(const std::string& path, const std::string& what,
                              uint64_t max_bytes) {
  ReadOnlyFile f(path, what);
  KILN_CHECK(f.size() <= max_bytes, "{}: the {} is {} bytes, over the limit of {} bytes", path,
             what, f.size(), max_bytes);
  std::string text(static_cast<size_t>(f.size()), '\0');
  KILN_CHECK(f.read_at(0, text.data(), text.size()),
             "{}: cannot read the {} (it changed while reading?)", path, what);
  return text;
}

bool prepare_private_dir(const std::string& dir, std::string* why, bool follow_links) {
  if (dir.empty()) {
    *why = "no directory given";
    return false;
  }
  fs::path p(dir);
  std::error_code ec;
  if (p.has_parent_path() && p.parent_path() != p) fs::create_directories(p.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = fmt::format("cannot create the directory: {}", errno_text(errno));
    return false;
  }
  struct stat st {};
  int rc = follow_links ? ::stat(dir.c_str(), &st) : ::lstat(dir.c_str(), &st);
  if (rc != 0) {
    *why = errno_text(errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *why = fmt::format("is {}, not a directory", file_kind(st.st_mode));
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    *why = fmt::format("is owned by another user (uid {}, this process runs as uid {})", st.st_uid,
                       ::geteuid());
    return false;
  }
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    *why = "is world-writable without the sticky bit (anyone could plant files in it)";
    return false;
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    *why = fmt::format("is not writable: {}", errno_text(errno));
    return false;
  }
  return true;
}

std::string random_hex() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t r = ::getrandom(b + got, sizeof b - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  if (got < sizeof b) {  // no getrandom (old kernel, seccomp): the library's random device
    std::random_device rd;
    for (unsigned char& c : b) c = static_cast<unsigned char>(rd());
  }
  std::string s;
  for (unsigned char c : b) s += fmt::format("{:02x}", c);
  return s;
}

bool write_file_atomic(const std::string& path, std::string_view data, std::string* why) {
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  fs::path tmp = dir / fmt::format(".{}.tmp.{}", p.filename().string(), random_hex());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    *why = fmt::format("cannot create {}: {}", tmp.string(), errno_text(errno));
    return false;
  }
  bool ok = write_all(fd, data.data(), data.size());
  int werr = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    werr = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return true;
  *why = ok ? fmt::format("cannot rename {} to {}: {}", tmp.string(), path, errno_text(errno))
            : fmt::format("cannot write {}: {}", tmp.string(), errno_text(werr));
  ::unlink(tmp.c_str());
  return false;
}

}  // namespace kiln
