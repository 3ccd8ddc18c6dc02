// Internals of graph-file and safetensors I/O (engine/json_io.cpp, engine/safetensors.cpp) that
// tests and the fuzzer reach: size limits, a lazily read safetensors file, JSON parsing helpers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/host_tensor.hpp"

namespace kiln {

// Guards against hostile files: a graph file may not ask for more than this.
struct LoadLimits {
  int64_t max_rank = 8;                                 // dims of any declared tensor
  int64_t max_dim = (int64_t{1} << 31) - 1;             // one static dim
  int64_t max_numel = int64_t{1} << 48;                 // static numel of an input
  int64_t max_constant_numel = int64_t{1} << 31;        // elements of one constant
  int64_t max_total_constant_numel = int64_t{1} << 32;  // all constants of one file
  int64_t max_attr_int = (int64_t{1} << 31) - 1;        // |integer attribute|
  int64_t max_file_bytes = int64_t{256} << 20;          // a graph file (big data: safetensors)
};
// The limits in force (process-wide; the fuzzer lowers them). Not thread-safe to change while
// loading.
LoadLimits& load_limits();

// How deeply JSON values may nest (graph files and safetensors headers need a handful of levels).
constexpr int kMaxJsonDepth = 256;

// Parses JSON text in linear time, refusing duplicate object keys, NUL bytes, trailing bytes
// after the value and nesting deeper than kMaxJsonDepth (engine/ir/json_parse.cpp). Errors are
// kiln::Error(User) starting with "<source>:<line>:<column>: " (or "<source>: " for duplicate
// keys).
nlohmann::ordered_json parse_json(const std::string& text, const std::string& source);
// "line:column" (1-based) of a byte offset in text.
std::string line_col(const std::string& text, size_t byte);

// A safetensors file whose header is parsed and fully validated (offsets in range, no overlap,
// byte counts matching shape and dtype for every known dtype); tensor data is read on demand.
struct SafetensorsEntry {
  std::string dtype;  // as in the file: "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

class SafetensorsFile {
 public:
  // Reads and validates the header; errors start with `path`.
  explicit SafetensorsFile(std::string path);
  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  // "a, b, c" (for "key missing" messages).
  std::string key_list() const;
  // The tensor of `key` (row-major logical). Errors: key missing (listing the keys), dtype not
  // F32/F16/BF16.
  HostTensor read(const std::string& key) const;

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  uint64_t file_size_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// kiln dtype from a safetensors dtype name ("F32" -> F32); false when kiln does not read it.
bool safetensors_dtype(const std::string& name, DType* out);
const char* safetensors_dtype_name(DType t);

}  // namespace kiln
