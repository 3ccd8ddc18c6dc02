#include "heuristics/tuning_table.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/base/check.hpp"
#include "engine/base/file_io.hpp"

namespace kiln {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A tuning file holds one small entry per contraction shape class.
constexpr uint64_t kMaxTuningFileBytes = uint64_t{16} << 20;

const char* kind_name(ContractionConfig::Kind k) {
  switch (k) {
    case ContractionConfig::Kind::Direct:
      return "direct";
    case ContractionConfig::Kind::Simt:
      return "simt";
    case ContractionConfig::Kind::Mma:
      return "mma";
    case ContractionConfig::Kind::Wgmma:
      return "wgmma";
    case ContractionConfig::Kind::Grouped:
      return "grouped";
  }
  return "direct";
}

bool kind_from(const std::string& s, ContractionConfig::Kind* k) {
  for (auto c : {ContractionConfig::Kind::Direct, ContractionConfig::Kind::Simt,
                 ContractionConfig::Kind::Mma, ContractionConfig::Kind::Wgmma,
                 ContractionConfig::Kind::Grouped})
    if (s == kind_name(c)) {
      *k = c;
      return true;
    }
  return false;
}

// A config read from a file is used only when it is one the emitters can build.
bool plausible(const ContractionConfig& c) {
  if (c.kind == ContractionConfig::Kind::Direct || c.kind == ContractionConfig::Kind::Simt ||
      c.kind == ContractionConfig::Kind::Grouped)
    return true;
  auto tile = [](int v) { return v == 64 || v == 128 || v == 256; };
  return tile(c.bm) && tile(c.bn) && (c.bk == 32 || c.bk == 64) && c.wm > 0 && c.wn > 0 &&
         c.bm % c.wm == 0 && c.bn % c.wn == 0 && c.stages >= 2 && c.stages <= 8 && c.split_k >= 1 &&
         c.split_k <= 16 &&
         (!c.ws || (c.kind == ContractionConfig::Kind::Wgmma && c.split_k == 1 && c.stages >= 3 &&
                    c.bm <= 128)) &&
         (!c.tma || c.ws) && (!c.im2col || c.tma) && (!c.rowfold || (c.tma && !c.im2col));
}

}  // namespace

std::string contraction_tuning_key(const ContractionProblemInfo& p, const std::string& structure) {
  return fmt::format("{}|{}|m{}{}|n{}|k{}|b{}|sm{}x{}{}", structure, dtype_name(p.dtype),
                     p.m_is_estimate ? "~" : "", p.m, p.n, p.k, p.batch, p.sm, p.sm_count,
                     p.wgmma_ok ? "a" : "");
}

std::string device_tuning_key(const std::string& key, const std::string& device) {
  return key + "|device=" + device;
}

TuningTable::TuningTable(std::string path, std::string* note) : path_(std::move(path)) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path_, ec))) return;  // no file yet: an empty table
  // Only a regular file of plausible size is read (a FIFO there would block the process).
  ReadOnlyFile f;
  std::string why, text;
  bool ok = f.open(path_, &why);
  if (ok && f.size() > kMaxTuningFileBytes) {
    ok = false;
    why = fmt::format("{} bytes, over the limit of {}", f.size(), kMaxTuningFileBytes);
  }
  if (ok) {
    text.resize(static_cast<size_t>(f.size()));
    ok = f.read_at(0, text.data(), text.size());
    if (!ok) why = "cannot be read";
  }
  if (!ok) {
    if (note)
      *note = fmt::format("tuning file {}: {}: ignored (it is rewritten on the next autotune)",
                          path_, why);
    return;
  }
  std::map<std::string, TuningEntry> e;
  if (parse(text, &e)) {
    entries_ = std::move(e);
  } else if (note) {
    *note = fmt::format(
        "tuning file {} is not a valid kiln tuning file: ignored (it is rewritten "
        "on the next autotune)",
        path_);
  }
}

std::optional<TuningEntry> TuningTable::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::optional<TuningEntry> TuningTable::find_for(const std::string& key,
                                                 const std::string& device) const {
  if (!device.empty()) return find(device_tuning_key(key, device));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string prefix = device_tuning_key(key, "");
  auto it = entries_.lower_bound(prefix);
  if (it != entries_.end() && it->first.compare(0, prefix.size(), prefix) == 0) return it->second;
  it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void TuningTable::put(const std::string& key, const TuningEntry& e) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[key] = e;
}

size_t TuningTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::string TuningTable::to_json() const {
  json entries = json::object();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, e] : entries_) {
      const ContractionConfig& c = e.config;
      entries[key] = {{"kind", kind_name(c.kind)},
                      {"bm", c.bm},
                      {"bn", c.bn},
                      {"bk", c.bk},
                      {"wm", c.wm},
                      {"wn", c.wn},
                      {"stages", c.stages},
                      {"split_k", c.split_k},
                      {"ws", c.ws},
                      {"tma", c.tma},
                      {"im2col", c.im2col},
                      {"rowfold", c.rowfold},
                      {"name", c.str()},
                      {"ms", e.ms},
                      {"rule_ms", e.rule_ms},
                      {"candidates", e.candidates}};
    }
  }
  json j = {{"kiln_tuning", 1}, {"entries", entries}};
  return j.dump(1);
}

bool TuningTable::parse(const std::string& text, std::map<std::string, TuningEntry>* out) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("kiln_tuning", 0) != 1 ||
      !j.contains("entries") || !j["entries"].is_object())
    return false;
  std::map<std::string, TuningEntry> m;
  for (auto it = j["entries"].begin(); it != j["entries"].end(); ++it) {
    const json& v = it.value();
    if (!v.is_object()) return false;
    TuningEntry e;
    ContractionConfig& c = e.config;
    try {
      if (!kind_from(v.at("kind").get<std::string>(), &c.kind)) return false;
      c.bm = v.at("bm").get<int>();
      c.bn = v.at("bn").get<int>();
      c.bk = v.at("bk").get<int>();
      c.wm = v.at("wm").get<int>();
      c.wn = v.at("wn").get<int>();
      c.stages = v.at("stages").get<int>();
      c.split_k = v.at("split_k").get<int>();
      c.ws = v.value("ws", false);
      c.tma = v.value("tma", false);
      c.im2col = v.value("im2col", false);
      c.rowfold = v.value("rowfold", false);
      e.ms = v.value("ms", 0.0);
      e.rule_ms = v.value("rule_ms", 0.0);
      e.candidates = v.value("candidates", 0);
    } catch (const json::exception&) {
      return false;
    }
    if (!plausible(c)) return false;
    m[it.key()] = e;
  }
  *out = std::move(m);
  return true;
}

void TuningTable::save() const {
  KILN_CHECK(!path_.empty(), "tuning table: no file to save to");
  std::error_code ec;
  fs::path p(path_);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::string why;
  KILN_CHECK(write_file_atomic(path_, to_json(), &why), "tuning file {}: {}", path_, why);
}

}  // namespace kiln
