// libFuzzer target: safetensors headers. The input is a header (byte 0 chooses how many data
// bytes follow it: 16 per unit); the file is the 8-byte header length, the header, the data.
// Parsing must refuse every bad header with a kiln::Error(User) and never crash; every tensor of a
// header that parses must read (or be refused, as a dtype kiln does not read) without a crash.
//
// Build and run: tools/fuzz.sh [SECONDS] fuzz_safetensors
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/ir/json_io.hpp"
#include "kiln/error.hpp"

namespace fs = std::filesystem;

namespace {
std::string g_path;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  fs::path dir = fs::temp_directory_path() / ("kiln_fuzz_safetensors_" + std::to_string(getpid()));
  fs::create_directories(dir);
  g_path = (dir / "input.safetensors").string();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t data_bytes = size_t{data[0]} * 16;
  const std::string header(reinterpret_cast<const char*>(data) + 1, size - 1);
  {
    std::ofstream f(g_path, std::ios::binary | std::ios::trunc);
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
    f << header << std::string(data_bytes, '\x3c');
  }
  try {
    kiln::SafetensorsFile f(g_path);
    for (const auto& [key, e] : f.entries()) {
      try {
        kiln::HostTensor t = f.read(key);
        if (t.data.size() != e.end - e.begin) {
          std::fprintf(stderr, "tensor '%s': %zu bytes read for [%llu, %llu]\n", key.c_str(),
                       t.data.size(), static_cast<unsigned long long>(e.begin),
                       static_cast<unsigned long long>(e.end));
          std::abort();
        }
      } catch (const kiln::Error& err) {
        if (err.kind() != kiln::ErrorKind::User) throw;
      }
    }
  } catch (const kiln::Error& e) {
    if (e.kind() != kiln::ErrorKind::User) {
      std::fprintf(stderr, "non-user error: %s\n", e.what());
      std::abort();
    }
  }
  return 0;
}
