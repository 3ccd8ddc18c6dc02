// The installed package works for an embedding application: `cmake --install` this build tree into
// a temporary prefix, configure and build examples/embed against it with find_package(kiln) and
// the same C++ compiler, run both programs on an example graph and check their outputs against
// the CPU reference computed here. Without a GPU they take the CPU path, with one the GPU path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "kiln/graph.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "runtime/cuda_driver.hpp"
#include "tests/shell_util.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

using kiln::testing::run_shell;
int run(const std::string& cmd, std::string* out) {
  return run_shell(cmd, out);
}

std::string q(const fs::path& p) {
  return "'" + p.string() + "'";
}

struct OutputLine {
  bool found = false;
  std::string shape;
  double sum = 0, abs = 0;
};

OutputLine parse_output(const std::string& text, const std::string& name) {
  std::smatch m;
  std::regex re("OUTPUT " + name +
                R"( shape \[([0-9,]*)\] sum ([-0-9.eE+naif]+) abs ([-0-9.eE+naif]+))");
  OutputLine o;
  if (!std::regex_search(text, m, re)) return o;
  o.found = true;
  o.shape = m[1];
  o.sum = std::stod(m[2]);
  o.abs = std::stod(m[3]);
  return o;
}

// The same values as input_value() in examples/embed/embed_c.c and embed_cpp.cpp.
double input_value(int which, size_t i) {
  return static_cast<double>(static_cast<int>((i * 7 + static_cast<size_t>(which) * 3) % 17) - 8) /
         8.0;
}

// The graph of examples/embed/embed_cpp.cpp.
Graph embed_cpp_graph() {
  Graph g("embed_cpp");
  Tensor x = g.input("x", DType::F32, {"N", 256});
  Tensor w = g.constant_random("w", TensorDesc{DType::F32, {256}, Layout::NCHW, {}}, "uniform", 0.5,
                               1.5, 7);
  Tensor h = g.mul(g.layernorm(x), w);
  g.output(g.add_node("add", {g.gelu(h, GeluApprox::None), x}, {}, "residual", {"y"})[0]);
  return g;
}

void expect_matches(const OutputLine& got, const HostTensor& want, double rtol,
                    const std::string& what) {
  std::vector<double> v = want.to_f64();
  double sum = 0, abs = 0;
  for (double x : v) {
    sum += x;
    abs += std::fabs(x);
  }
  std::string shape;
  for (int64_t d : want.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  EXPECT_EQ(got.shape, shape) << what;
  EXPECT_NEAR(got.sum, sum, rtol * abs + 1e-3) << what;
  EXPECT_NEAR(got.abs, abs, rtol * abs + 1e-3) << what;
}

TEST(EmbedInstall, ExamplesBuildAndRunAgainstTheInstalledPackage) {
  const fs::path build = kiln::testing::build_dir();
  const fs::path src = kiln::testing::source_dir();
  ASSERT_TRUE(fs::exists(build / "libkiln.so"))
      << "the shared library is not built in " << build << " (build the 'kiln' target)";
  fs::path tmp = fs::temp_directory_path() / ("kiln_embed_" + std::to_string(getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  fs::path prefix = tmp / "prefix", ebuild = tmp / "build", cache = tmp / "cache";

  std::string out;
  ASSERT_EQ(run("cmake --install " + q(build) + " --prefix " + q(prefix), &out), 0) << out;
  ASSERT_TRUE(fs::exists(prefix / "include" / "kiln" / "kiln.h")) << out;
  ASSERT_TRUE(fs::exists(prefix / "share" / "kiln" / "onnx2kiln" / "__main__.py")) << out;
  ASSERT_TRUE(fs::exists(prefix / "share" / "kiln" / "onnx2kiln" / "ops" / "conv_pool.py")) << out;
  EXPECT_FALSE(fs::exists(prefix / "share" / "kiln" / "onnx2kiln" / "__pycache__")) << out;

  std::string gen;
  if (run("command -v ninja", &gen) == 0) gen = " -G Ninja";
  ASSERT_EQ(run("cmake -S " + q(src / "examples" / "embed") + " -B " + q(ebuild) + gen +
                    " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + q(prefix) +
                    " -DCMAKE_CXX_COMPILER=" + q(KILN_CXX_COMPILER),
                &out),
            0)
      << out;
  ASSERT_EQ(run("cmake --build " + q(ebuild) + " -j 2", &out), 0) << out;

  bool gpu = cuda::driver_available();
  std::string path_line = gpu ? "path: gpu" : "path: cpu reference";
  std::string env = "KILN_CACHE_DIR=" + q(cache) + " ";

  // The C program on a file graph (f16, two inputs, a symbolic row count).
  fs::path graph_file = src / "examples" / "graphs" / "add_layernorm_gelu.json";
  ASSERT_EQ(run(env + q(ebuild / "embed_c") + " " + q(graph_file) + " x=4,4096 r=4,4096", &out), 0)
      << out;
  EXPECT_NE(out.find(path_line), std::string::npos) << out;
  EXPECT_NE(out.find("workspace: "), std::string::npos) << out;
  {
    Graph g = load_graph_file(graph_file.string());
    std::map<std::string, HostTensor> in;
    int which = 0;
    for (const char* name : {"x", "r"}) {  // the order the command line gives them
      std::vector<double> v(4 * 4096);
      for (size_t i = 0; i < v.size(); ++i) v[i] = input_value(which, i);
      in[name] = HostTensor::from_f64(g.tensor(g.find(name)).desc.dtype, {4, 4096}, v);
      ++which;
    }
    OutputLine o = parse_output(out, "y");
    ASSERT_TRUE(o.found) << out;
    expect_matches(o, run_reference(g, in).at("y"), gpu ? 1e-2 : 1e-6, "embed_c: " + out);
  }

  // The C++ program (a builder-made graph).
  ASSERT_EQ(run(env + q(ebuild / "embed_cpp") + " 5", &out), 0) << out;
  EXPECT_NE(out.find(path_line), std::string::npos) << out;
  {
    Graph g = embed_cpp_graph();
    std::vector<double> v(5 * 256);
    for (size_t i = 0; i < v.size(); ++i) v[i] = input_value(0, i);
    OutputLine o = parse_output(out, "y");
    ASSERT_TRUE(o.found) << out;
    expect_matches(o,
                   run_reference(g, {{"x", HostTensor::from_f64(DType::F32, {5, 256}, v)}}).at("y"),
                   gpu ? 1e-4 : 1e-6, "embed_cpp: " + out);
  }
  // A bad graph path is reported through kiln_last_error() with a non-zero exit.
  EXPECT_NE(run(env + q(ebuild / "embed_c") + " /nonexistent.json x=1", &out), 0);
  EXPECT_NE(out.find("kiln_graph_load_file"), std::string::npos) << out;
  EXPECT_NE(out.find("/nonexistent.json"), std::string::npos) << out;
  fs::remove_all(tmp);
}

}  // namespace
