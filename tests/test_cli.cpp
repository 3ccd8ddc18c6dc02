// The `kiln` command line, run as a subprocess: every example graph, every bad graph, bad usage,
// --output files, and `--input` files against run_reference called directly.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/base/random.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "tests/test_paths.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

struct CliResult {
  int rc = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh directory per test, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln_cli_XXXXXX").string();
    char* d = mkdtemp(tmpl.data());
    if (d == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = d;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& n) const { return path_ / n; }

 private:
  fs::path path_;
};

// Runs the CLI with `args`; `env` ("NAME=VALUE" items) is added to its environment.
CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  TempDir tmp;
  std::string cmd;
  if (!env.empty()) {
    cmd = "env";
    for (const std::string& e : env) cmd += " " + quote(e);
    cmd += " ";
  }
  cmd += quote(kiln::testing::cli_path());
  for (const std::string& a : args) cmd += " " + quote(a);
  cmd +=
      " >" + quote((tmp / "out").string()) + " 2>" + quote((tmp / "err").string()) + " </dev/null";
  int st = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  r.out = slurp(tmp / "out");
  r.err = slurp(tmp / "err");
  return r;
}

std::string src(const std::string& rel) {
  return (fs::path(kiln::testing::source_dir()) / rel).string();
}

std::vector<std::string> json_files(const std::string& dir) {
  std::vector<std::string> v;
  if (!fs::is_directory(src(dir))) return v;
  for (const auto& e : fs::directory_iterator(src(dir)))
    if (e.path().extension() == ".json") v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

// Small bindings for every symbol of a graph: N=1 (batch), anything else 8.
std::vector<std::string> shape_args(const Graph& g) {
  std::vector<std::string> a;
  for (const std::string& s : g.symbols()) {
    a.push_back("--shape");
    a.push_back(s + (s == "N" ? "=1" : "=8"));
  }
  return a;
}

// FNV-1a 64 of the row-major bytes, computed independently of the CLI.
uint64_t fnv(const HostTensor& t) {
  HostTensor r = t.is_row_major() ? t : t.relayout(Layout::NCHW);
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : r.data) {
    h ^= static_cast<uint64_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

// The checksum `kiln run` printed for output `name`, or "" when it printed none.
std::string printed_checksum(const std::string& out, const std::string& name) {
  std::smatch m;
  std::regex re("output " + name + ": [^\\n]* fnv1a64=([0-9a-f]{16})");
  return std::regex_search(out, m, re) ? m[1].str() : std::string();
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string ctx(const std::vector<std::string>& args, const CliResult& r) {
  std::string s = "kiln";
  for (const auto& a : args) s += " " + a;
  return s + "\n  rc=" + std::to_string(r.rc) + "\n  stdout: " + r.out + "\n  stderr: " + r.err;
}

// A user error: exit 2, nothing on stdout, one line "kiln: ..." on stderr.
void expect_user_error(const std::vector<std::string>& args, const std::string& needle = {},
                       const std::vector<std::string>& env = {}) {
  CliResult r = run_cli(args, env);
  EXPECT_EQ(r.rc, 2) << ctx(args, r);
  EXPECT_EQ(r.out, "") << ctx(args, r);
  EXPECT_EQ(r.err.rfind("kiln: ", 0), 0u) << ctx(args, r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << ctx(args, r);
  if (!needle.empty()) {
    EXPECT_NE(r.err.find(needle), std::string::npos) << ctx(args, r);
  }
}

std::map<std::string, HostTensor> random_inputs(const Graph& g, const Bindings& b, uint64_t seed) {
  std::map<std::string, HostTensor> in;
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    std::vector<int64_t> shape = eval_shape(t.desc.shape, b);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    in[t.name] = HostTensor::from_f64(t.desc.dtype, shape,
                                      random_values(false, -2.0, 2.0, seed++, n));  // row-major
  }
  return in;
}

void expect_same(const HostTensor& a, const HostTensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype, b.dtype) << what;
  ASSERT_EQ(a.shape, b.shape) << what;
  EXPECT_EQ(hex(fnv(a)), hex(fnv(b))) << what;
  std::vector<double> va = a.to_f64(), vb = b.to_f64();
  int64_t bad = 0;
  for (size_t i = 0; i < va.size(); ++i)
    if (!(va[i] == vb[i])) ++bad;
  EXPECT_EQ(bad, 0) << what << ": elements that differ";
}

}  // namespace

TEST(Cli, HelpAndVersion) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"},
                                        {"-h"},
                                        {"help"},
                                        {"help", "run"},
                                        {"help", "check"},
                                        {"run", "--help"},
                                        {"check", "--help"},
                                        {"run", "x.json", "--shape", "N=1", "--help"}}) {
    CliResult r = run_cli(args);
    EXPECT_EQ(r.rc, 0) << ctx(args, r);
    EXPECT_EQ(r.err, "") << ctx(args, r);
    EXPECT_NE(r.out.find("usage: kiln"), std::string::npos) << ctx(args, r);
  }
  CliResult r = run_cli({"run", "--help"});
  for (const char* flag :
       {"--shape", "--inputs", "--input", "--seed", "--output", "--device", "--threads"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  r = run_cli({"--help"});
  EXPECT_NE(r.out.find("check"), std::string::npos);
  EXPECT_NE(r.out.find("run"), std::string::npos);
  r = run_cli({"--version"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, std::string("kiln ") + KILN_VERSION + "\n");
}

TEST(Cli, BadUsageIsExit2WithOneLine) {
  const std::string ex = src("examples/graphs/resnet50_bottleneck.json");
  expect_user_error({}, "expected a command");
  expect_user_error({"bogus"}, "unknown command 'bogus'");
  expect_user_error({"help", "bogus"}, "bogus");
  expect_user_error({"check"}, "check --help");
  expect_user_error({"check", ex, ex}, "expected 1 argument");
  expect_user_error({"check", ex, "--shape", "N=1"}, "unknown flag '--shape'");
  expect_user_error({"run"}, "run --help");
  expect_user_error({"run", ex, "--bogus"}, "unknown flag '--bogus'");
  expect_user_error({"run", ex, "--shape"}, "--shape needs a value");
  expect_user_error({"run", ex, "--shape", "N"}, "SYM=V");
  expect_user_error({"run", ex, "--shape", "=3"}, "SYM=V");
  expect_user_error({"run", ex, "--shape", "N=0"}, "at least 1");
  expect_user_error({"run", ex, "--shape", "N=-4"}, "at least 1");
  expect_user_error({"run", ex, "--shape", "N=1x"}, "expected an integer, found '1x'");
  expect_user_error({"run", ex, "--shape", "N=99999999999999999999"}, "expected an integer");
  expect_user_error({"run", ex, "--shape", "M=2"}, "no symbol 'M'");
  expect_user_error({"run", ex, "--shape", "N=4611686018427387904"}, "more than 2^63 bytes");
  expect_user_error({"run", ex, "--shape", "N=100000000"}, "elements");
  expect_user_error({"run", ex, "--shape", "N=1", "--shape", "N=2"}, "given twice");
  expect_user_error({"run", ex, "--shape", "N=1", "--seed", "x"}, "--seed");
  expect_user_error({"run", ex, "--shape", "N=1", "--seed", "1", "--seed", "2"}, "more than once");
  expect_user_error({"run", ex, "--shape", "N=1", "--threads", "-1"}, "--threads");
  expect_user_error({"run", ex, "--shape", "N=1", "--threads", "1000000"}, "--threads");
  expect_user_error({"run", ex, "--shape", "N=1", "--device", "tpu"}, "auto, cpu, gpu or gpu:N");
  expect_user_error({"run", ex, "--shape", "N=1", "--input", "x"}, "NAME=FILE");
  expect_user_error({"run", ex, "--shape", "N=1", "--input", "y=/nonexistent.safetensors"},
                    "'y' is not an input");
  expect_user_error({"run", ex, "--shape", "N=1", "--input", "x=/nonexistent.safetensors"},
                    "/nonexistent.safetensors");
  expect_user_error({"run", ex, "--shape", "N=1", "--inputs", "/nonexistent.safetensors"},
                    "/nonexistent.safetensors");
  expect_user_error({"run", src("examples/graphs/no_such_graph.json")}, "no_such_graph.json");
}

TEST(Cli, UnknownKilnEnvironmentVariableIsAWarningAndAnUnknownItemAnError) {
  const std::string ex = src("examples/graphs/add_layernorm_gelu.json");
  // Another tool's KILN_* variable (or a misspelling) does not block kiln: one warning line.
  CliResult w = run_cli({"check", ex}, {"KILN_DSIABLE=fusion", "KILN_OTHER_TOOL=1"});
  EXPECT_EQ(w.rc, 0) << w.err;
  EXPECT_EQ(std::count(w.err.begin(), w.err.end(), '\n'), 1) << w.err;
  EXPECT_NE(w.err.find("kiln: warning: environment variables KILN_DSIABLE, KILN_OTHER_TOOL"),
            std::string::npos)
      << w.err;
  EXPECT_NE(w.err.find("KILN_DISABLE"), std::string::npos) << w.err;  // the valid names
  expect_user_error({"run", ex, "--shape", "rows=2"}, "fuson", {"KILN_DISABLE=fuson"});
  CliResult r = run_cli({"check", ex}, {"KILN_DISABLE=fusion", "NOT_KILN=1"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(Cli, RandomInputNeedsItsSymbolsBound) {
  expect_user_error({"run", src("examples/graphs/resnet50_bottleneck.json")}, "symbol 'N'");
  expect_user_error({"run", src("examples/graphs/transformer_mlp.json")}, "--shape seq=V");
}

// --passes: the CPU reference of the graph after the Engine's passes (the bottleneck's batchnorms
// folded, its views), checked against the graph as built; a usage error beside --check or a GPU.
TEST(Cli, PassesRunsTheRewrittenGraphAgainstTheBuiltOne) {
  const std::vector<std::string> args = {
      "run",      src("examples/graphs/resnet50_bottleneck.json"),
      "--shape",  "N=1",
      "--device", "cpu",
      "--passes"};
  CliResult r = run_cli(args);
  EXPECT_EQ(r.rc, 0) << ctx(args, r);
  EXPECT_NE(r.out.find("check  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of the graph after the passes"), std::string::npos) << r.out;
  std::vector<std::string> bad = args;
  bad.back() = "--check";
  bad.push_back("--passes");
  expect_user_error(bad, "--passes runs on the CPU reference");
}

TEST(Cli, DeviceGpuIsRefusedWithoutAGpu) {
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "a CUDA driver is present: --device gpu is tested in tests/gpu";
  }
  std::vector<std::string> args = {
      "run", src("examples/graphs/resnet50_bottleneck.json"), "--shape", "N=1", "--device", "gpu"};
  expect_user_error(args, "kiln: run: --device gpu:0: no CUDA device: ");
  CliResult r = run_cli(args);
  EXPECT_NE(r.err.find("CUDA"), std::string::npos) << r.err;
  // auto falls back to the CPU reference and says why
  args.back() = "auto";
  r = run_cli(args);
  EXPECT_EQ(r.rc, 0) << ctx(args, r);
  EXPECT_NE(r.out.find("cpu reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--device auto: "), std::string::npos) << r.out;
}

// --device gpu:N for run, bench, explain and cache warm: parsed strictly (exit 2 naming the valid
// forms, with or without a GPU), then refused without a driver; `kiln devices` says there is none.
TEST(Cli, DeviceFlagIsStrict) {
  const std::string ex = src("examples/graphs/add_layernorm_gelu.json");
  const std::vector<std::vector<std::string>> cmds = {{"run", ex, "--shape", "rows=2"},
                                                      {"bench", ex, "--shape", "rows=2"},
                                                      {"explain", ex, "--shape", "rows=2"},
                                                      {"cache", "warm", ex, "--shape", "rows=2"}};
  for (const auto& base : cmds) {
    const bool run = base[0] == "run";
    for (const char* bad : {"gpu:", "gpu:-1", "gpu:+1", "gpu:1x", "gpu: 1", "GPU:0", "gpu0",
                            "gpu:00001", "gpu:99999", "cuda:0", ""}) {
      std::vector<std::string> args = base;
      args.push_back("--device");
      args.push_back(bad);
      expect_user_error(args, run ? "expected auto, cpu, gpu or gpu:N" : "expected gpu or gpu:N");
    }
    if (!run) {  // cpu / auto are `kiln run`'s alone
      std::vector<std::string> args = base;
      args.insert(args.end(), {"--device", "cpu"});
      expect_user_error(args, "expected gpu or gpu:N");
    }
  }
  expect_user_error({"cache", "stats", "--device", "gpu:0"}, "are for 'cache warm'");
  expect_user_error({"devices", "extra"}, "devices --help");
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "a CUDA driver is present: ordinals are tested in tests/gpu";
  }
  for (auto args : cmds) {
    args.insert(args.end(), {"--device", "gpu:1"});
    expect_user_error(args, "--device gpu:1: no CUDA device: ");
  }
  CliResult r = run_cli({"devices"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_EQ(
      r.out.rfind("no CUDA devices: the CUDA driver library libcuda.so.1 could not be loaded", 0),
      0u)
      << r.out;
  EXPECT_NE(r.out.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << r.out;
  r = run_cli({"devices"}, {"CUDA_VISIBLE_DEVICES=MIG-GPU-1234"});
  EXPECT_NE(r.out.find("CUDA_VISIBLE_DEVICES=MIG-GPU-1234"), std::string::npos) << r.out;
}

TEST(Cli, ExamplesCheckAndRun) {
  std::vector<std::string> files = json_files("examples/graphs");
  for (const char* want :
       {"resnet50_bottleneck.json", "transformer_mlp.json", "unet_resblock.json"})
    EXPECT_TRUE(std::any_of(files.begin(), files.end(),
                            [&](const std::string& f) { return fs::path(f).filename() == want; }))
        << "missing example " << want;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    Graph g = load_graph_file(f);
    CliResult r = run_cli({"check", f});
    ASSERT_EQ(r.rc, 0) << ctx({"check", f}, r);
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("is valid"), std::string::npos) << r.out;
    for (const TensorInfo& t : g.tensors()) {  // every tensor with its inferred type
      EXPECT_NE(r.out.find(t.name + " "), std::string::npos) << t.name;
      EXPECT_NE(r.out.find(t.desc.str()), std::string::npos) << t.desc.str();
    }
    for (const std::string& s : g.symbols()) EXPECT_NE(r.out.find(s), std::string::npos) << s;

    // --json: the same types, one JSON object (what `kiln import` checks its graphs with).
    r = run_cli({"check", "--json", f});
    ASSERT_EQ(r.rc, 0) << ctx({"check", "--json", f}, r);
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["graph"], g.name());
    EXPECT_EQ(j["symbols"].get<std::vector<std::string>>(), g.symbols());
    EXPECT_EQ(j["tensors"].size(), g.tensors().size());
    for (const TensorInfo& t : g.tensors()) {
      const nlohmann::json& e = j["tensors"][t.name];
      const char* role = t.role == TensorRole::Input      ? "input"
                         : t.role == TensorRole::Constant ? "constant"
                                                          : "intermediate";
      EXPECT_EQ(e["role"], role) << t.name;
      EXPECT_EQ(e["dtype"], dtype_name(t.desc.dtype)) << t.name;
      EXPECT_EQ(e["layout"], layout_name(t.desc.layout)) << t.name;
      ASSERT_EQ(e["shape"].size(), t.desc.shape.size()) << t.name;
      for (size_t i = 0; i < t.desc.shape.size(); ++i) {
        const Dim& d = t.desc.shape[i];
        if (d.is_static())
          EXPECT_EQ(e["shape"][i], d.value()) << t.name;
        else
          EXPECT_EQ(e["shape"][i], d.str()) << t.name;
      }
    }

    std::vector<std::string> args = {"run", f, "--device", "cpu"};
    for (const std::string& a : shape_args(g)) args.push_back(a);
    r = run_cli(args);
    ASSERT_EQ(r.rc, 0) << ctx(args, r);
    EXPECT_EQ(r.err, "");
    for (int id : g.outputs()) {
      EXPECT_NE(printed_checksum(r.out, g.tensor(id).name), "") << ctx(args, r);
      EXPECT_EQ(r.out.find("nan="), std::string::npos) << ctx(args, r);
    }
    EXPECT_NE(r.out.find("time: "), std::string::npos);
  }
}

TEST(Cli, ResnetBottleneckRunsAtBatch1) {
  std::vector<std::string> args = {
      "run", src("examples/graphs/resnet50_bottleneck.json"), "--shape", "N=1", "--device", "auto"};
  CliResult r = run_cli(args);
  ASSERT_EQ(r.rc, 0) << ctx(args, r);
  EXPECT_NE(r.out.find("output y: f16 [1, 256, 56, 56] NHWC"), std::string::npos) << r.out;
  // relu at the end: min is exactly 0 for normal inputs of this size
  EXPECT_NE(r.out.find("min=0 "), std::string::npos) << r.out;
}

TEST(Cli, BadGraphsAreRefusedNamingTheFile) {
  std::vector<std::string> files = json_files("tests/bad_graphs");
  if (files.empty()) GTEST_SKIP() << "tests/bad_graphs/ has no files yet";
  for (const std::string& f : files) {
    CliResult r = run_cli({"check", f});
    EXPECT_EQ(r.rc, 2) << ctx({"check", f}, r);
    EXPECT_EQ(r.out, "") << f;
    EXPECT_EQ(r.err.rfind("kiln: ", 0), 0u) << ctx({"check", f}, r);
    EXPECT_NE(r.err.find(fs::path(f).filename().string()), std::string::npos)
        << ctx({"check", f}, r);
    // `run` refuses them the same way, before anything runs.
    r = run_cli({"run", f, "--device", "cpu"});
    EXPECT_EQ(r.rc, 2) << ctx({"run", f}, r);
    EXPECT_NE(r.err.find(fs::path(f).filename().string()), std::string::npos) << ctx({"run", f}, r);
  }
}

TEST(Cli, OutputFileHoldsThePrintedChecksum) {
  TempDir tmp;
  std::string out = (tmp / "y.safetensors").string();
  for (const char* ex :
       {"examples/graphs/resnet50_bottleneck.json", "examples/graphs/transformer_mlp.json"}) {
    SCOPED_TRACE(ex);
    Graph g = load_graph_file(src(ex));
    std::vector<std::string> args = {"run", src(ex), "--device", "cpu", "--output", out};
    for (const std::string& a : shape_args(g)) args.push_back(a);
    CliResult r = run_cli(args);
    ASSERT_EQ(r.rc, 0) << ctx(args, r);
    std::map<std::string, HostTensor> got = read_safetensors(out);
    ASSERT_EQ(got.size(), g.outputs().size());
    for (int id : g.outputs()) {
      const TensorInfo& t = g.tensor(id);
      ASSERT_TRUE(got.count(t.name)) << t.name;
      const HostTensor& h = got.at(t.name);
      EXPECT_EQ(h.dtype, t.desc.dtype);
      EXPECT_EQ(printed_checksum(r.out, t.name), hex(fnv(h))) << r.out;
    }
  }
}

TEST(Cli, SeedIsDeterministic) {
  std::string ex = src("examples/graphs/add_layernorm_gelu.json");
  auto sum = [&](const char* seed) {
    CliResult r = run_cli({"run", ex, "--shape", "rows=3", "--seed", seed, "--threads", "1"});
    EXPECT_EQ(r.rc, 0) << r.err;
    return printed_checksum(r.out, "y");
  };
  std::string a = sum("7");
  EXPECT_NE(a, "");
  EXPECT_EQ(a, sum("7"));
  EXPECT_NE(a, sum("8"));
}

// `kiln run --input x=FILE` gives exactly what run_reference gives on the same tensor.
TEST(Cli, InputFileMatchesRunReference) {
  TempDir tmp;
  struct Case {
    const char* file;
    Bindings b;
  };
  for (const Case& c : {Case{"examples/graphs/transformer_mlp.json", {{"seq", 5}}},
                        Case{"examples/graphs/resnet50_bottleneck.json", {{"N", 1}}}}) {
    SCOPED_TRACE(c.file);
    Graph g = load_graph_file(src(c.file));
    std::map<std::string, HostTensor> in = random_inputs(g, c.b, 42);
    ASSERT_EQ(in.size(), 1u);
    std::string xin = (tmp / "x.safetensors").string(), yout = (tmp / "y.safetensors").string();
    // Saved under another key: --input takes a file's only tensor whatever its name.
    write_safetensors(xin, {{"activations", in.begin()->second}});
    std::vector<std::string> args = {"run",      src(c.file), "--device",
                                     "cpu",      "--input",   in.begin()->first + "=" + xin,
                                     "--output", yout};
    CliResult r = run_cli(args);
    ASSERT_EQ(r.rc, 0) << ctx(args, r);
    std::map<std::string, HostTensor> want = run_reference(g, in);
    std::map<std::string, HostTensor> got = read_safetensors(yout);
    for (int id : g.outputs()) {
      const std::string& name = g.tensor(id).name;
      ASSERT_TRUE(got.count(name));
      expect_same(got.at(name), want.at(name).relayout(Layout::NCHW), name);
      EXPECT_EQ(printed_checksum(r.out, name), hex(fnv(want.at(name))));
    }
  }
}

TEST(Cli, InputsFileMatchesRunReference) {
  TempDir tmp;
  std::string ex = src("examples/graphs/add_layernorm_gelu.json");
  Graph g = load_graph_file(ex);
  std::map<std::string, HostTensor> in = random_inputs(g, {{"rows", 6}}, 3);
  ASSERT_EQ(in.size(), 2u);
  std::string xin = (tmp / "in.safetensors").string(), yout = (tmp / "y.safetensors").string();
  write_safetensors(xin, in);
  CliResult r = run_cli({"run", ex, "--inputs", xin, "--output", yout, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("rows=6"), std::string::npos) << r.out;
  expect_same(read_safetensors(yout).at("y"), run_reference(g, in).at("y"), "y");

  // --input overrides one tensor of --inputs; the other still comes from the file.
  std::map<std::string, HostTensor> in2 = random_inputs(g, {{"rows", 6}}, 99);
  std::string rin = (tmp / "r.safetensors").string();
  write_safetensors(rin, {{"r", in2.at("r")}});
  r = run_cli(
      {"run", ex, "--inputs", xin, "--input", "r=" + rin, "--output", yout, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  in["r"] = in2.at("r");
  expect_same(read_safetensors(yout).at("y"), run_reference(g, in).at("y"), "y (override)");

  // One input from a file, the other random: the file's shape binds the symbol.
  r = run_cli({"run", ex, "--input", "x=" + xin});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("rows=6"), std::string::npos) << r.out;
}

// An NHWC input read from a file (safetensors: logical row-major) reaches the kernels in its
// declared layout. Runs on the GPU where there is one (kiln_tests Cli.* on the device): the GPU
// session uploads bytes as they are, and once uploaded the file's row-major bytes to an NHWC
// input, a scrambled image whose result was only ~2 % off for a random-weight ResNet-50.
TEST(Cli, NhwcInputFileMatchesTheReferenceOnEveryDevice) {
  TempDir tmp;
  std::string ex = src("examples/graphs/resnet50_bottleneck.json");
  Graph g = load_graph_file(ex);
  ASSERT_EQ(g.tensor(g.inputs()[0]).desc.layout, Layout::NHWC);
  std::map<std::string, HostTensor> in = random_inputs(g, {{"N", 2}}, 5);
  std::string xin = (tmp / "in.safetensors").string(), yout = (tmp / "y.safetensors").string();
  write_safetensors(xin, in);
  std::vector<std::string> args = {"run",      ex,   "--inputs", xin,
                                   "--output", yout, "--device", "auto"};
  CliResult r = run_cli(args);
  ASSERT_EQ(r.rc, 0) << ctx(args, r);
  std::printf("device used: %s\n", r.out.find("gpu:") != std::string::npos ? "gpu" : "cpu");
  HostTensor got = read_safetensors(yout).at("y");
  HostTensor want = run_reference(g, in).at("y");
  ASSERT_EQ(got.shape, want.shape);
  std::vector<double> a = got.to_f64(), b = want.to_f64();
  double scale = 1e-30, err = 0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size(); ++i)
    err = std::isnan(a[i]) ? INFINITY : std::max(err, std::abs(a[i] - b[i]));
  EXPECT_LE(err / scale, 1e-2) << ctx(args, r);  // f16 storage
}

TEST(Cli, BadInputFilesAreUserErrors) {
  TempDir tmp;
  std::string ex = src("examples/graphs/add_layernorm_gelu.json");
  Graph g = load_graph_file(ex);
  std::map<std::string, HostTensor> in = random_inputs(g, {{"rows", 4}}, 5);
  std::string f = (tmp / "a.safetensors").string();

  // wrong dtype
  write_safetensors(
      f, {{"x", HostTensor::from_f64(DType::F32, {4, 4096}, std::vector<double>(4 * 4096, 1.0))}});
  expect_user_error({"run", ex, "--input", "x=" + f, "--shape", "rows=4"}, "f16");
  // wrong size of a static dim
  write_safetensors(
      f, {{"x", HostTensor::from_f64(DType::F16, {4, 100}, std::vector<double>(400, 1.0))}});
  expect_user_error({"run", ex, "--input", "x=" + f}, "input 'x'");
  // wrong rank
  write_safetensors(f,
                    {{"x", HostTensor::from_f64(DType::F16, {4096}, std::vector<double>(4096))}});
  expect_user_error({"run", ex, "--input", "x=" + f}, "rank");
  // two inputs disagree on a symbol
  write_safetensors(f, {{"x", in.at("x")}});
  std::string f2 = (tmp / "b.safetensors").string();
  write_safetensors(f2, {{"r", random_inputs(g, {{"rows", 5}}, 1).at("r")}});
  expect_user_error({"run", ex, "--input", "x=" + f, "--input", "r=" + f2}, "rows");
  // --shape disagrees with a given input
  expect_user_error({"run", ex, "--input", "x=" + f, "--shape", "rows=9"}, "rows");
  // several tensors, none named like the input
  write_safetensors(f, {{"a", in.at("x")}, {"b", in.at("r")}});
  expect_user_error({"run", ex, "--input", "x=" + f, "--shape", "rows=4"}, "no tensor 'x'");
  // --inputs with a tensor that is no input of the graph
  expect_user_error({"run", ex, "--inputs", f}, "not an input");
  // the same input twice
  write_safetensors(f, {{"x", in.at("x")}});
  expect_user_error({"run", ex, "--input", "x=" + f, "--input", "x=" + f}, "given twice");
  // not a safetensors file at all
  std::ofstream(f) << "this is not a safetensors file";
  expect_user_error({"run", ex, "--input", "x=" + f, "--shape", "rows=4"}, f);
  // the io engineer's broken safetensors files, as --inputs and as --input
  for (const char* bad : {"bad_header", "f64", "overlap", "short"}) {
    std::string bf = src(std::string("tests/bad_graphs/") + bad + ".safetensors");
    if (!fs::exists(bf)) continue;
    expect_user_error({"run", ex, "--inputs", bf}, bf);
    expect_user_error({"run", ex, "--input", "x=" + bf, "--shape", "rows=4"}, bf);
  }
  // --output into a directory that does not exist
  expect_user_error(
      {"run", ex, "--shape", "rows=4", "--output", (tmp / "no/such/dir/y.st").string()},
      "no/such/dir");
}
