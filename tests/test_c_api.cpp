// The C ABI (include/kiln/kiln.h) without a GPU: every function with NULL handles and pointers,
// bad graph strings, bad names and bad indices returns a status and a message and never throws;
// the compile-only path and the CPU reference through kiln_run_host.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/graph.hpp"
#include "kiln/host_tensor.hpp"
#include "kiln/kiln.h"
#include "kiln/reference.hpp"

namespace {

std::string err() {
  return kiln_last_error();
}

const char* kSmall = R"({"kiln": 1, "name": "small",
  "inputs": {"x": {"dtype": "f32", "shape": ["N", 8]}},
  "nodes": [{"op": "relu", "inputs": ["x"], "outputs": ["h"]},
            {"op": "exp", "inputs": ["h"], "outputs": ["y"]}],
  "outputs": ["y"]})";

std::string cache_dir() {
  auto d = std::filesystem::temp_directory_path() / ("kiln_c_api_" + std::to_string(getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(CApi, VersionAndDefaults) {
  EXPECT_STREQ(kiln_version(), KILN_VERSION);
  kiln_engine_options o;
  std::memset(&o, 0x7f, sizeof(o));
  kiln_engine_options_default(&o);
  EXPECT_EQ(o.arch, nullptr);
  EXPECT_EQ(o.fusion, 1);
  EXPECT_EQ(o.disk_cache, 1);
  EXPECT_EQ(o.load_kernels, 1);
  EXPECT_EQ(o.cuda_graphs, 0);
  EXPECT_EQ(o.specialize_after, 0);
  EXPECT_EQ(o.autotune, 0);
  EXPECT_EQ(o.tuning_file, nullptr);
  kiln_engine_options_default(nullptr);  // harmless
}

// The newer options reach the Engine: a negative specialize_after is refused with its name.
TEST(CApi, NewerOptionsReachTheEngine) {
  kiln_engine_options o;
  kiln_engine_options_default(&o);
  o.load_kernels = 0;
  o.arch = "sm_90";
  o.specialize_after = -1;
  kiln_engine e = nullptr;
  EXPECT_EQ(kiln_engine_create(&o, &e), KILN_ERROR_USER);
  EXPECT_NE(err().find("specialize_after"), std::string::npos) << err();
  o.specialize_after = 3;
  o.autotune = 1;  // without a device: the rules (and a tuning file, if any)
  std::string tf = cache_dir() + "/tuning.json";
  o.tuning_file = tf.c_str();
  ASSERT_EQ(kiln_engine_create(&o, &e), KILN_OK) << err();
  kiln_stats st;
  ASSERT_EQ(kiln_engine_stats(e, &st), KILN_OK);
  EXPECT_EQ(st.autotune_measured, 0);
  EXPECT_EQ(st.autotune_reused, 0);
  kiln_engine_destroy(e);
}

TEST(CApi, NullArgumentsEverywhere) {
  kiln_graph g = nullptr;
  kiln_engine e = nullptr;
  kiln_compiled c = nullptr;
  int32_t n = 0;
  const char* name = nullptr;
  kiln_stats st;
  uint64_t bytes = 0;
  int32_t rank = 0;
  int64_t shape[KILN_MAX_RANK];
  kiln_dtype dt;

  EXPECT_EQ(kiln_graph_load_file(nullptr, &g), KILN_ERROR_ARGUMENT);
  EXPECT_NE(err().find("path is NULL"), std::string::npos) << err();
  EXPECT_EQ(kiln_graph_load_file("x.json", nullptr), KILN_ERROR_ARGUMENT);
  EXPECT_NE(err().find("out is NULL"), std::string::npos) << err();
  EXPECT_EQ(kiln_graph_load_string(nullptr, nullptr, &g), KILN_ERROR_ARGUMENT);
  EXPECT_NE(err().find("json is NULL"), std::string::npos) << err();
  EXPECT_EQ(kiln_graph_load_string(kSmall, nullptr, nullptr), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_graph_num_inputs(nullptr, &n), KILN_ERROR_ARGUMENT);
  EXPECT_NE(err().find("g is NULL"), std::string::npos) << err();
  EXPECT_EQ(kiln_graph_num_outputs(nullptr, &n), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_graph_input_name(nullptr, 0, &name), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_graph_output_name(nullptr, 0, &name), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_graph_tensor_dtype(nullptr, "x", &dt), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_engine_create(nullptr, nullptr), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_engine_stats(nullptr, &st), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_engine_has_device(nullptr), 0);
  EXPECT_EQ(kiln_compile(nullptr, nullptr, &c), KILN_ERROR_ARGUMENT);
  EXPECT_NE(err().find("e is NULL"), std::string::npos) << err();
  EXPECT_EQ(kiln_output_shape(nullptr, nullptr, 0, nullptr, nullptr, 0, "y", &rank, shape),
            KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_workspace_size(nullptr, nullptr, 0, nullptr, nullptr, 0, &bytes),
            KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_run(nullptr, nullptr, 0, nullptr, 0, nullptr, 0), KILN_ERROR_ARGUMENT);
  EXPECT_NE(err().find("c is NULL"), std::string::npos) << err();
  EXPECT_EQ(kiln_run_host(nullptr, nullptr, 0, nullptr, 0), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_device_alloc(16, nullptr), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_memcpy_htod(0, nullptr, 4), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_memcpy_dtoh(nullptr, 0, 4), KILN_ERROR_ARGUMENT);
  // Destroying NULL handles is a no-op.
  kiln_graph_destroy(nullptr);
  kiln_engine_destroy(nullptr);
  kiln_compiled_destroy(nullptr);
  kiln_device_free(0);
}

TEST(CApi, BadGraphStrings) {
  kiln_graph g = reinterpret_cast<kiln_graph>(0x1);
  EXPECT_EQ(kiln_graph_load_string("{not json", nullptr, &g), KILN_ERROR_USER);
  EXPECT_EQ(g, nullptr);
  EXPECT_FALSE(err().empty());
  EXPECT_EQ(kiln_graph_load_string("", nullptr, &g), KILN_ERROR_USER);
  EXPECT_FALSE(err().empty());
  EXPECT_EQ(kiln_graph_load_string(R"({"kiln": 1, "nodes": [{"op": "nosuchop"}]})", nullptr, &g),
            KILN_ERROR_USER);
  EXPECT_FALSE(err().empty());
  EXPECT_EQ(kiln_graph_load_file("/nonexistent/graph.json", &g), KILN_ERROR_USER);
  EXPECT_NE(err().find("/nonexistent/graph.json"), std::string::npos) << err();
  // A good call clears the last error.
  ASSERT_EQ(kiln_graph_load_string(kSmall, nullptr, &g), KILN_OK) << err();
  EXPECT_EQ(err(), "");
  kiln_graph_destroy(g);
}

TEST(CApi, NamesIndicesAndCompileOnly) {
  kiln_graph g = nullptr;
  ASSERT_EQ(kiln_graph_load_string(kSmall, nullptr, &g), KILN_OK) << err();
  int32_t n = -1;
  ASSERT_EQ(kiln_graph_num_inputs(g, &n), KILN_OK);
  EXPECT_EQ(n, 1);
  ASSERT_EQ(kiln_graph_num_outputs(g, &n), KILN_OK);
  EXPECT_EQ(n, 1);
  const char* name = nullptr;
  ASSERT_EQ(kiln_graph_input_name(g, 0, &name), KILN_OK);
  EXPECT_STREQ(name, "x");
  ASSERT_EQ(kiln_graph_output_name(g, 0, &name), KILN_OK);
  EXPECT_STREQ(name, "y");
  EXPECT_EQ(kiln_graph_input_name(g, 1, &name), KILN_ERROR_ARGUMENT);
  EXPECT_NE(err().find("out of range"), std::string::npos) << err();
  EXPECT_EQ(kiln_graph_output_name(g, -1, &name), KILN_ERROR_ARGUMENT);
  kiln_dtype dt = KILN_BF16;
  ASSERT_EQ(kiln_graph_tensor_dtype(g, "x", &dt), KILN_OK);
  EXPECT_EQ(dt, KILN_F32);
  EXPECT_EQ(kiln_graph_tensor_dtype(g, "nope", &dt), KILN_ERROR_USER);
  EXPECT_NE(err().find("'nope'"), std::string::npos) << err();

  kiln_engine_options o;
  kiln_engine_options_default(&o);
  o.load_kernels = 0;
  o.arch = "sm_99x";
  kiln_engine e = nullptr;
  EXPECT_EQ(kiln_engine_create(&o, &e), KILN_ERROR_USER);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(err().find("sm_99x"), std::string::npos) << err();
  o.arch = "sm_90";
  std::string dir = cache_dir();
  o.cache_dir = dir.c_str();
  ASSERT_EQ(kiln_engine_create(&o, &e), KILN_OK) << err();
  kiln_compiled c = nullptr;
  ASSERT_EQ(kiln_compile(e, g, &c), KILN_OK) << err();
  kiln_stats st;
  ASSERT_EQ(kiln_engine_stats(e, &st), KILN_OK);
  EXPECT_GE(st.plans, 1);
  EXPECT_EQ(st.graph_cache_hits, 0);
  EXPECT_EQ(st.autotune_measured, 0);  // no device here, and nothing asked for it

  kiln_tensor in;
  std::memset(&in, 0, sizeof(in));
  in.name = "x";
  in.rank = 2;
  in.shape[0] = 3;
  in.shape[1] = 8;
  int32_t rank = 0;
  int64_t shape[KILN_MAX_RANK] = {};
  ASSERT_EQ(kiln_output_shape(c, &in, 1, nullptr, nullptr, 0, "y", &rank, shape), KILN_OK) << err();
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(shape[0], 3);
  EXPECT_EQ(shape[1], 8);
  EXPECT_EQ(kiln_output_shape(c, &in, 1, nullptr, nullptr, 0, "nope", &rank, shape),
            KILN_ERROR_USER);
  EXPECT_NE(err().find("'nope'"), std::string::npos) << err();
  uint64_t ws = 1;
  EXPECT_EQ(kiln_workspace_size(c, &in, 1, nullptr, nullptr, 0, &ws), KILN_OK) << err();
  // Wrong rank, a bad rank, a NULL name, a duplicate, an unbound symbol, NULL symbol entries.
  kiln_tensor bad = in;
  bad.rank = 3;
  EXPECT_EQ(kiln_workspace_size(c, &bad, 1, nullptr, nullptr, 0, &ws), KILN_ERROR_USER);
  EXPECT_NE(err().find("x"), std::string::npos) << err();
  bad.rank = KILN_MAX_RANK + 1;
  EXPECT_EQ(kiln_workspace_size(c, &bad, 1, nullptr, nullptr, 0, &ws), KILN_ERROR_USER);
  EXPECT_NE(err().find("out of range"), std::string::npos) << err();
  bad = in;
  bad.name = nullptr;
  EXPECT_EQ(kiln_workspace_size(c, &bad, 1, nullptr, nullptr, 0, &ws), KILN_ERROR_USER);
  EXPECT_NE(err().find("name is NULL"), std::string::npos) << err();
  kiln_tensor two[2] = {in, in};
  EXPECT_EQ(kiln_workspace_size(c, two, 2, nullptr, nullptr, 0, &ws), KILN_ERROR_USER);
  EXPECT_NE(err().find("given twice"), std::string::npos) << err();
  EXPECT_EQ(kiln_workspace_size(c, nullptr, 0, nullptr, nullptr, 0, &ws), KILN_ERROR_USER);
  EXPECT_NE(err().find("N"), std::string::npos) << err();
  EXPECT_EQ(kiln_workspace_size(c, nullptr, 1, nullptr, nullptr, 0, &ws), KILN_ERROR_USER);
  EXPECT_NE(err().find("array is NULL"), std::string::npos) << err();
  EXPECT_EQ(kiln_workspace_size(c, nullptr, 0, nullptr, nullptr, 1, &ws), KILN_ERROR_USER);
  EXPECT_NE(err().find("NULL entry"), std::string::npos) << err();
  const char* sym = "N";
  int64_t val = 5;
  EXPECT_EQ(kiln_output_shape(c, nullptr, 0, &sym, &val, 1, "y", &rank, shape), KILN_OK) << err();
  EXPECT_EQ(shape[0], 5);

  // Running a compile-only graph is a user error that says why.
  kiln_tensor out = in;
  out.name = "y";
  in.ptr = 256;
  out.ptr = 512;
  EXPECT_EQ(kiln_run(c, &in, 1, &out, 1, nullptr, 0), KILN_ERROR_USER);
  EXPECT_NE(err().find("load_kernels"), std::string::npos) << err();

  kiln_compiled_destroy(c);
  kiln_engine_destroy(e);
  kiln_graph_destroy(g);
  std::filesystem::remove_all(dir);
}

TEST(CApi, RunHostMatchesReference) {
  kiln_graph g = nullptr;
  ASSERT_EQ(kiln_graph_load_string(kSmall, nullptr, &g), KILN_OK) << err();
  std::vector<float> x(3 * 8), y(3 * 8, NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 2.0f;
  kiln_host_tensor in;
  std::memset(&in, 0, sizeof(in));
  in.name = "x";
  in.data = x.data();
  in.bytes = x.size() * sizeof(float);
  in.rank = 2;
  in.shape[0] = 3;
  in.shape[1] = 8;
  kiln_host_tensor out;
  std::memset(&out, 0, sizeof(out));
  out.name = "y";
  out.data = y.data();
  out.bytes = y.size() * sizeof(float);
  ASSERT_EQ(kiln_run_host(g, &in, 1, &out, 1), KILN_OK) << err();
  EXPECT_EQ(out.rank, 2);
  EXPECT_EQ(out.shape[0], 3);
  EXPECT_EQ(out.shape[1], 8);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y[i], std::exp(std::max(x[i], 0.0f)), 1e-5 * std::exp(std::max(x[i], 0.0f)));

  // Errors: wrong byte count, unknown input/output, missing input, small output buffer, NULLs.
  kiln_host_tensor b = in;
  b.bytes -= 4;
  EXPECT_EQ(kiln_run_host(g, &b, 1, &out, 1), KILN_ERROR_USER);
  EXPECT_NE(err().find("bytes given"), std::string::npos) << err();
  b = in;
  b.name = "nope";
  EXPECT_EQ(kiln_run_host(g, &b, 1, &out, 1), KILN_ERROR_USER);
  EXPECT_NE(err().find("not an input"), std::string::npos) << err();
  b = in;
  b.data = nullptr;
  EXPECT_EQ(kiln_run_host(g, &b, 1, &out, 1), KILN_ERROR_USER);
  EXPECT_NE(err().find("data is NULL"), std::string::npos) << err();
  EXPECT_EQ(kiln_run_host(g, nullptr, 0, &out, 1), KILN_ERROR_USER);
  EXPECT_NE(err().find("'x'"), std::string::npos) << err();
  kiln_host_tensor o2 = out;
  o2.name = "h";  // an intermediate, not an output
  EXPECT_EQ(kiln_run_host(g, &in, 1, &o2, 1), KILN_ERROR_USER);
  EXPECT_NE(err().find("not an output"), std::string::npos) << err();
  o2 = out;
  o2.bytes = 8;
  EXPECT_EQ(kiln_run_host(g, &in, 1, &o2, 1), KILN_ERROR_USER);
  EXPECT_NE(err().find("the output needs 96"), std::string::npos) << err();
  EXPECT_EQ(kiln_run_host(g, &in, 1, nullptr, 1), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_run_host(g, &in, -1, &out, 1), KILN_ERROR_ARGUMENT);
  kiln_graph_destroy(g);
}

TEST(CApi, DeviceCallsWithoutADeviceFailCleanly) {
  kiln_engine_options o;
  kiln_engine_options_default(&o);
  o.load_kernels = 0;
  o.disk_cache = 0;
  kiln_engine e = nullptr;
  ASSERT_EQ(kiln_engine_create(&o, &e), KILN_OK) << err();
  bool device = kiln_engine_has_device(e) == 1;
  kiln_engine_destroy(e);
  if (device) GTEST_SKIP() << "a device is present: the no-device errors do not apply";
  uint64_t p = 7;
  EXPECT_EQ(kiln_device_alloc(64, &p), KILN_ERROR_DRIVER);
  EXPECT_EQ(p, 0u);
  EXPECT_NE(err().find("CUDA driver not available"), std::string::npos) << err();
  char buf[4];
  EXPECT_EQ(kiln_memcpy_htod(256, buf, 4), KILN_ERROR_DRIVER);
  EXPECT_EQ(kiln_memcpy_dtoh(buf, 256, 4), KILN_ERROR_DRIVER);
  EXPECT_EQ(kiln_stream_synchronize(nullptr), KILN_ERROR_DRIVER);
  EXPECT_FALSE(err().empty());
}

}  // namespace

// Integer and bool tensors through the C ABI: their dtype values, and kiln_run_host on i64 token
// ids (values beyond 2^53 stay exact) and a bool mask.
TEST(CApi, IntegerAndBoolTensors) {
  const char* graph = R"({"kiln": 1, "name": "ids",
    "inputs": {"ids": {"dtype": "i64", "shape": ["N"]}, "m": {"dtype": "bool", "shape": ["N"]},
               "k": {"dtype": "i32", "shape": [1]}},
    "nodes": [{"op": "add", "inputs": ["ids", "k"], "outputs": ["s"]},
              {"op": "where", "inputs": ["m", "s", "ids"], "outputs": ["y"]},
              {"op": "gt", "inputs": ["y", "ids"], "outputs": ["up"]}],
    "outputs": ["y", "up"]})";
  kiln_graph g = nullptr;
  ASSERT_EQ(kiln_graph_load_string(graph, nullptr, &g), KILN_OK) << err();
  kiln_dtype dt = KILN_F32;
  ASSERT_EQ(kiln_graph_tensor_dtype(g, "ids", &dt), KILN_OK);
  EXPECT_EQ(dt, KILN_I64);
  ASSERT_EQ(kiln_graph_tensor_dtype(g, "k", &dt), KILN_OK);
  EXPECT_EQ(dt, KILN_I32);
  ASSERT_EQ(kiln_graph_tensor_dtype(g, "up", &dt), KILN_OK);
  EXPECT_EQ(dt, KILN_BOOL);
  EXPECT_EQ(KILN_I32, 3);
  EXPECT_EQ(KILN_I64, 4);
  EXPECT_EQ(KILN_BOOL, 5);

  const int64_t big = (int64_t{1} << 53) + 1;  // not an f64
  std::vector<int64_t> ids = {big, -7, 3, INT64_MAX};
  std::vector<uint8_t> m = {1, 0, 1, 1};
  int32_t k = 2;
  auto host = [](const char* name, void* data, uint64_t bytes, int64_t n) {
    kiln_host_tensor t;
    std::memset(&t, 0, sizeof(t));
    t.name = name;
    t.data = data;
    t.bytes = bytes;
    t.rank = 1;
    t.shape[0] = n;
    return t;
  };
  kiln_host_tensor in[3] = {host("ids", ids.data(), 32, 4), host("m", m.data(), 4, 4),
                            host("k", &k, 4, 1)};
  std::vector<int64_t> y(4, 0);
  std::vector<uint8_t> up(4, 9);
  kiln_host_tensor out[2] = {host("y", y.data(), 32, 0), host("up", up.data(), 4, 0)};
  ASSERT_EQ(kiln_run_host(g, in, 3, out, 2), KILN_OK) << err();
  // INT64_MAX + 2 wraps (two's complement).
  EXPECT_EQ(y, (std::vector<int64_t>{big + 2, -7, 5, INT64_MIN + 1}));
  EXPECT_EQ(up, (std::vector<uint8_t>{1, 0, 1, 0}));
  kiln_host_tensor bad = in[0];
  bad.bytes = 16;  // i64 takes 8 bytes an element
  in[0] = bad;
  EXPECT_EQ(kiln_run_host(g, in, 3, out, 2), KILN_ERROR_USER);
  EXPECT_NE(err().find("the shape needs 32 (i64)"), std::string::npos) << err();
  kiln_graph_destroy(g);
}
