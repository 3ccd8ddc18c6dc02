// libFuzzer target: graph-file loading must refuse every bad input with a kiln::Error(User) and
// never crash; every graph that loads must save and reload to the same text.
//
// Build and run: tools/fuzz.sh [SECONDS] [fuzz_graph_loader]
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/ir/json_io.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"

namespace fs = std::filesystem;

namespace {

std::string g_base_dir;

void write_raw(const fs::path& p, const std::string& header, const std::string& data) {
  std::ofstream f(p, std::ios::binary);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
  f << header << data;
}

// The weight files that the seed corpus (and tests/bad_graphs) refer to, good and bad.
void make_weight_files(const fs::path& dir) {
  std::vector<double> w(72);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01 * static_cast<double>(i);
  kiln::write_safetensors(
      (dir / "weights.safetensors").string(),
      {{"w", kiln::HostTensor::from_f64(kiln::DType::F32, {4, 2, 3, 3}, w)},
       {"w16", kiln::HostTensor::from_f64(kiln::DType::F16, {4}, {1, 2, 3, 4})}});
  write_raw(dir / "short.safetensors",
            R"({"w":{"dtype":"F32","shape":[4,2,3,3],"data_offsets":[0,288]}})",
            std::string(100, '\1'));
  write_raw(dir / "overlap.safetensors",
            R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
            R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
            std::string(24, '\0'));
  write_raw(dir / "f64.safetensors", R"({"w":{"dtype":"F64","shape":[4],"data_offsets":[0,32]}})",
            std::string(32, '\0'));
  write_raw(dir / "bad_header.safetensors", R"({"w":{"dtype":"F32")", std::string(16, '\0'));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Small limits: a hostile file may ask for big constants, the fuzzer has 2 GB.
  kiln::LoadLimits& l = kiln::load_limits();
  l.max_constant_numel = int64_t{1} << 16;
  l.max_total_constant_numel = int64_t{1} << 18;
  fs::path dir = fs::temp_directory_path() / ("kiln_fuzz_graph_loader_" + std::to_string(getpid()));
  fs::create_directories(dir);
  make_weight_files(dir);
  g_base_dir = dir.string();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  kiln::Graph g;
  try {
    g = kiln::load_graph_string(text, "fuzz.json", g_base_dir);
  } catch (const kiln::Error& e) {
    if (e.kind() != kiln::ErrorKind::User) {
      std::fprintf(stderr, "non-user error while loading: %s\n", e.what());
      std::abort();
    }
    return 0;
  }
  // Constants from files are read when first used: read them now (a file that is bad only in
  // its data, such as a short one, is refused then, still as a user error).
  for (const kiln::TensorInfo& t : g.tensors()) {
    if (!t.data.has_value()) continue;
    try {
      (void)t.data->numel();
    } catch (const kiln::Error& e) {
      if (e.kind() != kiln::ErrorKind::User) {
        std::fprintf(stderr, "non-user error while reading constant '%s': %s\n", t.name.c_str(),
                     e.what());
        std::abort();
      }
      return 0;
    }
  }
  // A graph that loaded is valid: saving and reloading it must work and be exact. Any exception
  // from here on is a bug, and escapes to libFuzzer as a crash.
  std::string s1 = kiln::save_graph_string(g);
  kiln::Graph g2 = kiln::load_graph_string(s1, "fuzz_saved.json", g_base_dir);
  std::string s2 = kiln::save_graph_string(g2);
  if (s1 != s2) {
    std::fprintf(stderr, "round trip differs:\n--- first save\n%s\n--- second save\n%s\n",
                 s1.c_str(), s2.c_str());
    std::abort();
  }
  return 0;
}
