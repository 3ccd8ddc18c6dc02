// Helpers for the hostile-input tests (issue 24): temp directories, raw files, a watchdog for
// operations that must not block, CPU time and peak memory.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "kiln/error.hpp"

namespace kiln::hostile {

namespace fs = std::filesystem;

// A fresh directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln_hostile_XXXXXX").string();
    char* d = mkdtemp(tmpl.data());
    if (d == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = d;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& n) const { return path_ / n; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

inline std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A safetensors file: the 8-byte header length, the header text as given, then `data`.
inline void write_raw_safetensors(const fs::path& p, const std::string& header,
                                  const std::string& data) {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_file(p, len + header + data);
}

// Runs f in a child process under an alarm: what it returns, "error: <message>" for a kiln::Error
// (prefixed "internal " unless it is a user error), or "TIMEOUT" / "CRASH" when the child hangs
// or dies. For operations that used to block forever.
inline std::string in_child(int seconds, const std::function<std::string()>& f) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(seconds));
    std::string out;
    try {
      out = f();
    } catch (const Error& e) {
      out = std::string(e.kind() == ErrorKind::User ? "" : "internal ") + "error: " + e.what();
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
    }
    size_t off = 0;
    while (off < out.size()) {
      ssize_t w = write(fds[1], out.data() + off, out.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) return WTERMSIG(st) == SIGALRM ? "TIMEOUT" : "CRASH";
  return out;
}

// CPU seconds this process has used (user + system).
inline double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Peak resident memory of this process so far, in MiB.
inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// A graph file: a chain of n relu nodes over x [N, 64] f16.
inline std::string relu_chain(int n) {
  std::string s =
      R"({"kiln": 1, "inputs": {"x": {"dtype": "f16", "shape": ["N", 64]}}, "nodes": [)";
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    std::string out = "t" + std::to_string(i);
    s += (i ? ",\n" : "\n") + std::string(R"({"op": "relu", "inputs": [")") + prev +
         R"("], "outputs": [")" + out + R"("]})";
    prev = out;
  }
  return s + "\n], \"outputs\": [\"" + prev + "\"]}\n";
}

// A small valid graph: y = relu(x), x [N, 8] f32.
inline const char* kSmallGraph =
    R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": ["N", 8]}},)"
    R"( "nodes": [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})";

}  // namespace kiln::hostile
