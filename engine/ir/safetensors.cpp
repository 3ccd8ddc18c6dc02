// Safetensors files: an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the data. Every tensor is in its logical shape, row-major.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "engine/base/check.hpp"
#include "engine/base/file_io.hpp"
#include "engine/base/memory_budget.hpp"
#include "engine/ir/json_io.hpp"
#include "kiln/io.hpp"

namespace kiln {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little endian");

namespace {

using ojson = nlohmann::ordered_json;

// Header length limit of the reference implementation (100 MB): a header is parsed into a DOM
// before anything else is checked, so its size bounds the parse's time and memory.
constexpr uint64_t kMaxHeader = 100'000'000;

// Element size of every dtype the format defines (0: unknown name).
size_t any_dtype_size(const std::string& d) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
  };
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

std::string json_type(const ojson& j) {
  return j.type_name();
}

}  // namespace

bool safetensors_dtype(const std::string& name, DType* out) {
  if (name == "F32")
    *out = DType::F32;
  else if (name == "F16")
    *out = DType::F16;
  else if (name == "BF16")
    *out = DType::BF16;
  else if (name == "I32")
    *out = DType::I32;
  else if (name == "I64")
    *out = DType::I64;
  else if (name == "BOOL")
    *out = DType::Bool;
  else
    return false;
  return true;
}

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::Bool:
      return "BOOL";
  }
  return "?";
}

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  ReadOnlyFile f(path_, "safetensors file");
  file_size_ = f.size();
  KILN_CHECK(file_size_ >= 8,
             "{}: file is {} bytes, too short for a safetensors file (8-byte header length, then "
             "the header)",
             path_, file_size_);
  unsigned char len_bytes[8];
  KILN_CHECK(f.read_at(0, len_bytes, 8), "{}: cannot read the header length", path_);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  KILN_CHECK(n <= file_size_ - 8,
             "{}: header length {} runs past the end of the file ({} bytes): truncated or not a "
             "safetensors file",
             path_, n, file_size_);
  KILN_CHECK(n <= kMaxHeader, "{}: header length {} is over the limit of {} bytes", path_, n,
             kMaxHeader);
  KILN_CHECK(n >= 2, "{}: header length {} is too short for a JSON object", path_, n);
  std::string header(static_cast<size_t>(n), '\0');
  KILN_CHECK(f.read_at(8, header.data(), header.size()), "{}: cannot read the {}-byte header",
             path_, n);
  data_start_ = 8 + n;
  uint64_t data_size = file_size_ - data_start_;

  ojson h = parse_json(header, path_ + " (header)");
  KILN_CHECK(h.is_object(), "{}: header: expected a JSON object, found {}", path_, json_type(h));
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& key = it.key();
    const ojson& v = it.value();
    std::string at = fmt::format("{}: header['{}']", path_, key);
    if (key == "__metadata__") {
      KILN_CHECK(v.is_object(), "{}: expected an object of strings, found {}", at, json_type(v));
      for (auto m = v.begin(); m != v.end(); ++m) {
        KILN_CHECK(m.value().is_string(), "{}['{}']: expected a string, found {}", at, m.key(),
                   json_type(m.value()));
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    KILN_CHECK(v.is_object(), "{}: expected an object with dtype, shape, data_offsets; found {}",
               at, json_type(v));
    for (auto k = v.begin(); k != v.end(); ++k)
      KILN_CHECK(k.key() == "dtype" || k.key() == "shape" || k.key() == "data_offsets",
                 "{}: unknown key '{}' (valid: dtype, shape, data_offsets)", at, k.key());
    KILN_CHECK(v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
               "{}: expected keys dtype, shape and data_offsets", at);
    SafetensorsEntry e;
    KILN_CHECK(v["dtype"].is_string(), "{}.dtype: expected a string, found {}", at,
               json_type(v["dtype"]));
    e.dtype = v["dtype"].get<std::string>();
    KILN_CHECK(v["shape"].is_array(), "{}.shape: expected a list of integers, found {}", at,
               json_type(v["shape"]));
    uint64_t numel = 1;
    bool overflow = false, has_zero = false;
    for (size_t i = 0; i < v["shape"].size(); ++i) {
      const ojson& d = v["shape"][i];
      KILN_CHECK(d.is_number_unsigned(), "{}.shape[{}]: expected a non-negative integer, found {}",
                 at, i, d.dump());
      uint64_t dv = d.get<uint64_t>();
      KILN_CHECK(dv <= uint64_t{1} << 62, "{}.shape[{}]: size {} is too large", at, i, dv);
      e.shape.push_back(static_cast<int64_t>(dv));
      if (dv == 0) has_zero = true;
      if (dv != 0 && numel > (uint64_t{1} << 62) / dv) overflow = true;
      if (!overflow) numel *= dv;
    }
    if (has_zero) numel = 0;
    overflow = overflow && !has_zero;
    KILN_CHECK(!overflow, "{}.shape: {} elements is too many", at, v["shape"].dump());
    const ojson& off = v["data_offsets"];
    KILN_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                   off[1].is_number_unsigned(),
               "{}.data_offsets: expected [begin, end] (non-negative integers), found {}", at,
               off.dump());
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    KILN_CHECK(e.begin <= e.end, "{}.data_offsets: begin {} is after end {}", at, e.begin, e.end);
    KILN_CHECK(e.end <= data_size,
               "{}.data_offsets: [{}, {}] runs past the end of the data ({} bytes after the "
               "header): truncated file?",
               at, e.begin, e.end, data_size);
    size_t es = any_dtype_size(e.dtype);
    if (es != 0) {
      KILN_CHECK(numel <= (uint64_t{1} << 62) / es && e.end - e.begin == numel * es,
                 "{}: {} bytes for {} {} elements of shape {}, expected {} bytes", at,
                 e.end - e.begin, numel, e.dtype, v["shape"].dump(), numel * es);
    }
    entries_[key] = std::move(e);
  }
  // No two tensors may share bytes.
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> by_offset;
  for (const auto& [k, e] : entries_)
    if (e.end > e.begin) by_offset.push_back({&k, &e});
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto& [pk, pe] = by_offset[i - 1];
    const auto& [ck, ce] = by_offset[i];
    KILN_CHECK(ce->begin >= pe->end,
               "{}: header: tensors '{}' (bytes [{}, {}]) and '{}' (bytes [{}, {}]) overlap", path_,
               *pk, pe->begin, pe->end, *ck, ce->begin, ce->end);
  }
}

std::string SafetensorsFile::key_list() const {
  std::string s;
  for (const auto& [k, e] : entries_) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "none" : s;
}

HostTensor SafetensorsFile::read(const std::string& key) const {
  auto it = entries_.find(key);
  KILN_CHECK(it != entries_.end(), "{}: no tensor '{}' (the file has: {})", path_, key, key_list());
  const SafetensorsEntry& e = it->second;
  DType dt;
  KILN_CHECK(
      safetensors_dtype(e.dtype, &dt),
      "{}: tensor '{}' has dtype {}, which kiln does not read (F32, F16, BF16, I32, I64, BOOL)",
      path_, key, e.dtype);
  HostTensor t;
  t.dtype = dt;
  t.shape = e.shape;
  t.strides = layout_strides(t.shape, Layout::NCHW);
  check_host_bytes(fmt::format("{}: tensor '{}' ({} {})", path_, key, e.dtype,
                               shape_str(Shape(e.shape.begin(), e.shape.end()))),
                   e.end - e.begin);
  t.data.resize(static_cast<size_t>(e.end - e.begin));
  if (!t.data.empty()) {
    ReadOnlyFile f(path_, "safetensors file");
    KILN_CHECK(
        f.size() == file_size_ && f.read_at(data_start_ + e.begin, t.data.data(), t.data.size()),
        "{}: tensor '{}': short read (the file changed while reading?)", path_, key);
  }
  return t;
}

std::map<std::string, HostTensor> read_safetensors(const std::string& path) {
  SafetensorsFile f(path);
  std::map<std::string, HostTensor> out;
  for (const auto& [k, e] : f.entries()) out.emplace(k, f.read(k));
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors) {
  ojson header = ojson::object();
  uint64_t offset = 0;
  std::vector<const HostTensor*> order;
  std::vector<HostTensor> relaid;  // row-major copies of the tensors that need one
  relaid.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    KILN_CHECK(!name.empty() && name != "__metadata__",
               "{}: tensor name '{}' cannot be written to a safetensors file", path, name);
    size_t es = dtype_size(t.dtype);
    KILN_CHECK(t.data.size() >= static_cast<size_t>(t.numel()) * es || t.numel() == 0,
               "{}: tensor '{}': {} bytes of data for {} elements", path, name, t.data.size(),
               t.numel());
    const HostTensor* src = &t;
    if (!t.is_row_major()) {
      relaid.push_back(t.relayout(Layout::NCHW));
      src = &relaid.back();
    }
    order.push_back(src);
    uint64_t bytes = static_cast<uint64_t>(src->numel()) * es;
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(f.good(), "{}: cannot write: {}", path, std::strerror(errno));
  unsigned char len[8];
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const HostTensor* t : order) {
    size_t bytes = static_cast<size_t>(t->numel()) * dtype_size(t->dtype);
    f.write(reinterpret_cast<const char*>(t->data.data()), static_cast<std::streamsize>(bytes));
  }
  f.close();
  KILN_CHECK(f.good(), "{}: write failed: {}", path, std::strerror(errno));
}

}  // namespace kiln
