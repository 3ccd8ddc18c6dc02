// Hostile input (issue 24) through the `kiln` command line: each row of the issue's table ends in
// exit 2 with one located line on stderr (or, for the big valid inputs, success), no signal, no
// hang (every run is under `timeout`), nothing written outside kiln's own directories.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "tests/hostile_util.hpp"
#include "tests/test_paths.hpp"

using namespace kiln::hostile;

namespace {

struct Result {
  int rc = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs the CLI under `timeout 60` with `env` ("NAME=VALUE", or "-u NAME" to unset) added.
Result run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  TempDir tmp;
  std::string cmd = "timeout 60 env";
  for (const std::string& e : env) cmd += " " + (e.rfind("-u ", 0) == 0 ? e : quote(e));
  cmd += " " + quote(kiln::testing::cli_path());
  for (const std::string& a : args) cmd += " " + quote(a);
  cmd +=
      " >" + quote((tmp / "out").string()) + " 2>" + quote((tmp / "err").string()) + " </dev/null";
  int st = std::system(cmd.c_str());
  Result r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  r.out = read_all(tmp / "out");
  r.err = read_all(tmp / "err");
  return r;
}

std::string ctx(const std::vector<std::string>& args, const Result& r) {
  std::string s = "kiln";
  for (const auto& a : args) s += " " + a;
  return s + "\n  rc=" + std::to_string(r.rc) + "\n  stdout: " + r.out + "\n  stderr: " + r.err;
}

// Exit 2 and exactly one line "kiln: <needle>..." on stderr.
void expect_one_line_error(const std::vector<std::string>& args,
                           const std::vector<std::string>& needles,
                           const std::vector<std::string>& env = {}) {
  Result r = run(args, env);
  EXPECT_EQ(r.rc, 2) << ctx(args, r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << ctx(args, r);
  EXPECT_EQ(r.err.rfind("kiln: ", 0), 0u) << ctx(args, r);
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << n << "\n" << ctx(args, r);
}

}  // namespace

TEST(HostileCli, Row1DeepNesting) {
  TempDir d;
  write_file(d / "deep.json", R"({"kiln": 1, "doc": )" + std::string(100000, '[') +
                                  std::string(100000, ']') + R"(, "outputs": ["x"]})");
  std::string p = (d / "deep.json").string();
  expect_one_line_error({"check", p}, {p + ":1:", "nesting deeper than 256 levels"});
}

TEST(HostileCli, Row2DumpsGoToAPrivateDirectoryWithoutHome) {
  TempDir d;
  write_file(d / "g.json", kSmallGraph);
  std::vector<std::string> args = {"emit", (d / "g.json").string(), "--out", (d / "out").string(),
                                   "--compile"};
  Result r = run(args, {"-u HOME", "-u XDG_CACHE_HOME", "-u KILN_CACHE_DIR",
                        "TMPDIR=" + d.path().string(), "KILN_DUMP=cuda"});
  EXPECT_EQ(r.rc, 0) << ctx(args, r);
  fs::path own = d / ("kiln-" + std::to_string(::geteuid()));
  EXPECT_NE(r.err.find("-> " + own.string() + "/kiln-"), std::string::npos) << ctx(args, r);
  for (const auto& e : fs::directory_iterator(d.path()))  // nothing loose in the shared dir
    EXPECT_TRUE(e.path() == own || e.path().filename() == "g.json" || e.path().filename() == "out")
        << e.path();
}

TEST(HostileCli, Row4HugeRandomConstantChecksAtOnce) {
  TempDir d;
  write_file(d / "big.json", R"({"kiln":1,"constants":{"w":{"dtype":"f16","shape":[1073741824],)"
                             R"("init":{"normal":{}}}},"outputs":["w"]})");
  Result r = run({"check", (d / "big.json").string()});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("w"), std::string::npos) << r.out;
}

TEST(HostileCli, Row5ShapeOverTheHostBudget) {
  TempDir d;
  write_file(d / "g.json", kSmallGraph);
  expect_one_line_error(
      {"run", (d / "g.json").string(), "--shape", "N=268435456", "--device", "cpu"},
      {"random input 'x' (f32[N, 8] = [268435456, 8])",
       "of host memory is over the budget of 1 GiB (set by KILN_MEMORY_BUDGET)"},
      {"KILN_MEMORY_BUDGET=1G"});
}

TEST(HostileCli, Row6FifoGraphAndInput) {
  TempDir d;
  fs::path fifo = d / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_one_line_error({"check", fifo.string()},
                        {fifo.string() + ": cannot open graph file: is a FIFO"});
  write_file(d / "g.json", kSmallGraph);
  expect_one_line_error({"run", (d / "g.json").string(), "--input", "x=" + fifo.string()},
                        {fifo.string() + ": cannot open safetensors file: is a FIFO"});
}

TEST(HostileCli, Row8CacheWarmIntoAFileIsAnError) {
  TempDir d;
  write_file(d / "g.json", kSmallGraph);
  write_file(d / "file", "x");
  expect_one_line_error({"cache", "warm", (d / "g.json").string(), "--shape", "N=1"},
                        {"kernel cache " + (d / "file").string() + ": is a regular file"},
                        {"KILN_CACHE_DIR=" + (d / "file").string()});
  EXPECT_EQ(read_all(d / "file"), "x");
}

TEST(HostileCli, Row9OldArchs) {
  TempDir d;
  write_file(d / "g.json", kSmallGraph);
  for (const char* a : {"sm_70", "sm_75"}) {
    expect_one_line_error(
        {"emit", (d / "g.json").string(), "--out", (d / "out").string(), "--compile", "--arch", a},
        {"--arch: kiln needs sm_80 or newer", a});
    expect_one_line_error({"plan", (d / "g.json").string(), "--arch", a}, {"sm_80"});
  }
}

TEST(HostileCli, Row10ExplainOfAWrappingShape) {
  TempDir d;
  write_file(d / "g.json", kSmallGraph);
  expect_one_line_error(
      {"explain", (d / "g.json").string(), "--shape", "N=1152921504606846976"},
      {"tensor 'x' (f32[N, 8])", "more than 2^63 bytes", "N=1152921504606846976"});
}

TEST(HostileCli, Row11NulAfterTheGraph) {
  TempDir d;
  write_file(d / "g.json", std::string(kSmallGraph) + std::string("\0junk", 5));
  std::string p = (d / "g.json").string();
  expect_one_line_error({"check", p}, {p + ":1:", "NUL byte"});
}
