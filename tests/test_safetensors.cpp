// Safetensors read/write: dtypes, layouts, the header form, and every kind of corrupt file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

#include "engine/ir/json_io.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "tests/user_error.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("kiln_safetensors_{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file with this header text and data (length field = header size unless overridden).
  std::string raw(const std::string& name, const std::string& header, size_t data_bytes,
                  int64_t length_field = -1) {
    std::string p = path(name);
    std::ofstream f(p, std::ios::binary);
    uint64_t n = length_field < 0 ? header.size() : static_cast<uint64_t>(length_field);
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
    f << header;
    for (size_t i = 0; i < data_bytes; ++i) f.put(static_cast<char>(i));
    return p;
  }

  fs::path dir_;
};

using test::user_error;

std::vector<double> ramp(int64_t n, double scale) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(scale * static_cast<double>(i % 97) - 3.0);
  return v;
}

std::string file_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_F(Safetensors, WriteReadAllDtypes) {
  std::map<std::string, HostTensor> in;
  in["b.f16"] = HostTensor::from_f64(DType::F16, {3, 5}, ramp(15, 0.125));
  in["a.f32"] = HostTensor::from_f64(DType::F32, {2, 3, 4}, ramp(24, 0.1));
  in["c.bf16"] = HostTensor::from_f64(DType::BF16, {7}, ramp(7, 1.5));
  in["scalar"] = HostTensor::from_f64(DType::F32, {}, {42.5});
  write_safetensors(path("t.safetensors"), in);
  auto out = read_safetensors(path("t.safetensors"));
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [k, t] : in) {
    ASSERT_TRUE(out.count(k)) << k;
    EXPECT_EQ(out[k].dtype, t.dtype) << k;
    EXPECT_EQ(out[k].shape, t.shape) << k;
    EXPECT_TRUE(out[k].is_row_major()) << k;
    EXPECT_TRUE(out[k].data == t.data) << k;
  }
  // Header: 8-byte aligned, padded with spaces, keys sorted, offsets contiguous.
  std::string bytes = file_bytes(path("t.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  std::string header = bytes.substr(8, n);
  EXPECT_LT(header.find("\"a.f32\""), header.find("\"b.f16\""));
  EXPECT_LT(header.find("\"b.f16\""), header.find("\"c.bf16\""));
  EXPECT_NE(header.find("\"dtype\":\"BF16\""), std::string::npos) << header;
  EXPECT_EQ(header.find_last_not_of(' '), header.find_last_of('}'));
  EXPECT_EQ(bytes.size(), 8 + n + 24 * 4 + 15 * 2 + 7 * 2 + 4);
}

TEST_F(Safetensors, NhwcIsWrittenInLogicalOrder) {
  std::vector<double> v = ramp(2 * 3 * 4 * 5, 0.5);
  HostTensor nhwc = HostTensor::from_f64(DType::F32, {2, 3, 4, 5}, v, Layout::NHWC);
  ASSERT_FALSE(nhwc.is_row_major());
  write_safetensors(path("n.safetensors"), {{"w", nhwc}});
  HostTensor back = read_safetensors(path("n.safetensors")).at("w");
  EXPECT_EQ(back.shape, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_TRUE(back.is_row_major());
  EXPECT_EQ(back.to_f64(), v);
  EXPECT_TRUE(back.data == HostTensor::from_f64(DType::F32, {2, 3, 4, 5}, v).data);
}

TEST_F(Safetensors, LazyFileSkipsUnsupportedDtypes) {
  // A file may hold dtypes kiln does not read (an I16 buffer): the file loads, only asking for
  // that tensor fails. I64 (PyTorch's num_batches_tracked) reads since kiln holds integers.
  std::string p = raw(
      "i16.safetensors",
      R"({"__metadata__": {"format": "pt"}, "bn.num_batches_tracked": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}, "bn.weight": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}, "q": {"dtype": "I16", "shape": [], "data_offsets": [16, 18]}})",
      18);
  SafetensorsFile f(p);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.read("bn.weight").shape, std::vector<int64_t>{2});
  EXPECT_EQ(f.read("bn.num_batches_tracked").dtype, DType::I64);
  std::string e = user_error([&] { f.read("q"); });
  EXPECT_NE(e.find("has dtype I16, which kiln does not read"), std::string::npos) << e;
  e = user_error([&] { f.read("nope"); });
  EXPECT_NE(e.find("no tensor 'nope' (the file has: bn.num_batches_tracked, bn.weight, q)"),
            std::string::npos)
      << e;
  e = user_error([&] { read_safetensors(p); });
  EXPECT_NE(e.find("I16"), std::string::npos) << e;
}

TEST_F(Safetensors, CorruptFilesAreUserErrors) {
  struct Case {
    std::string name, header;
    size_t data;
    int64_t length_field;
    std::string expect;
  };
  const std::string ok = R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";
  std::vector<Case> cases = {
      {"len_past_end", ok, 16, 1000, "header length 1000 runs past the end of the file"},
      {"not_json", "{\"w\": [1, 2", 16, -1, "invalid JSON"},
      {"not_object", "[1, 2, 3]", 0, -1, "header: expected a JSON object"},
      {"entry_not_object", R"({"w": 3})", 0, -1, "header['w']: expected an object"},
      {"unknown_entry_key",
       R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": 1}})", 4, -1,
       "unknown key 'extra'"},
      {"missing_offsets", R"({"w": {"dtype": "F32", "shape": [1]}})", 4, -1,
       "expected keys dtype, shape and data_offsets"},
      {"offsets_past_end", ok, 12, -1, "data_offsets: [0, 16] runs past the end of the data"},
      {"offsets_reversed", R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", 8,
       -1, "begin 8 is after end 0"},
      {"negative_offset", R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 8,
       -1, "data_offsets: expected [begin, end]"},
      {"byte_count", R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", 16, -1,
       "12 bytes for 4 F32 elements of shape [2,2], expected 16 bytes"},
      {"overlap",
       R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       12, -1, "tensors 'a' (bytes [0, 8]) and 'b' (bytes [4, 12]) overlap"},
      {"negative_dim", R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, -1,
       "shape[0]: expected a non-negative integer"},
      {"huge_shape",
       R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4611686018427387904], "data_offsets": [0, 4]}})",
       4, -1, "is too many"},
      {"duplicate_key",
       R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
       4, -1, "duplicate key 'w'"},
      {"bad_metadata", R"({"__metadata__": {"a": 1}})", 0, -1, "['a']: expected a string"},
  };
  for (const Case& c : cases) {
    std::string p = raw(c.name + ".safetensors", c.header, c.data, c.length_field);
    std::string e = user_error([&] { read_safetensors(p); });
    EXPECT_NE(e.find(p), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.name << ": " << e;
  }
  // Too short for the length field; missing file.
  {
    std::ofstream f(path("tiny.safetensors"), std::ios::binary);
    f << "abc";
  }
  EXPECT_NE(user_error([&] {
              read_safetensors(path("tiny.safetensors"));
            }).find("file is 3 bytes, too short"),
            std::string::npos);
  EXPECT_NE(user_error([&] {
              read_safetensors(path("missing.safetensors"));
            }).find("cannot open safetensors file"),
            std::string::npos);
  // A good file cut short.
  write_safetensors(path("cut.safetensors"),
                    {{"w", HostTensor::from_f64(DType::F32, {64}, ramp(64, 1))}});
  fs::resize_file(path("cut.safetensors"), fs::file_size(path("cut.safetensors")) - 10);
  EXPECT_NE(user_error([&] {
              read_safetensors(path("cut.safetensors"));
            }).find("runs past the end of the data"),
            std::string::npos);
}

TEST_F(Safetensors, UnsupportedDtype) {
  std::string p = raw("f64.safetensors",
                      R"({"w": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}})", 16);
  std::string e = user_error([&] { read_safetensors(p); });
  EXPECT_NE(
      e.find("tensor 'w' has dtype F64, which kiln does not read (F32, F16, BF16, I32, I64, BOOL)"),
      std::string::npos)
      << e;
}

TEST_F(Safetensors, WriteErrors) {
  HostTensor t = HostTensor::from_f64(DType::F32, {1}, {1});
  EXPECT_NE(user_error([&] {
              write_safetensors(path("no/such/dir/x.safetensors"), {{"w", t}});
            }).find("cannot write"),
            std::string::npos);
  EXPECT_NE(user_error([&] {
              write_safetensors(path("m.safetensors"), {{"__metadata__", t}});
            }).find("cannot be written"),
            std::string::npos);
}

// Python's safetensors reads what kiln writes (skipped where it is not installed).
TEST_F(Safetensors, ReadableByPythonSafetensors) {
  if (std::system("python3 -c 'import safetensors, numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with safetensors and numpy is not installed";
  std::map<std::string, HostTensor> in;
  in["w"] = HostTensor::from_f64(DType::F32, {2, 3, 2, 2}, ramp(24, 0.25), Layout::NHWC);
  in["h"] = HostTensor::from_f64(DType::F16, {5}, ramp(5, 0.5));
  in["b"] = HostTensor::from_f64(DType::BF16, {3}, ramp(3, 2));
  write_safetensors(path("py.safetensors"), in);
  std::string script = path("check.py");
  {
    std::ofstream f(script);
    f << "import sys, numpy as np\n"
         "from safetensors import safe_open\n"
         "with safe_open(sys.argv[1], 'np') as f:\n"
         "    assert sorted(f.keys()) == ['b', 'h', 'w'], f.keys()\n"
         "    w = f.get_tensor('w')\n"
         "    assert w.shape == (2, 3, 2, 2) and w.dtype == np.float32\n"
         "    ref = np.array([0.25 * i - 3 for i in range(24)], np.float32).reshape(2, 3, 2, 2)\n"
         "    assert (w == ref).all(), w\n"
         "    h = f.get_tensor('h')\n"
         "    assert h.dtype == np.float16 and list(h) == [-3, -2.5, -2, -1.5, -1], h\n"
         "    assert f.get_slice('b').get_shape() == [3]\n";
  }
  EXPECT_EQ(std::system(fmt::format("python3 {} {}", script, path("py.safetensors")).c_str()), 0);
}
