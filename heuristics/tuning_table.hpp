// Persisted autotuning results: for each contraction shape class, the config that measured
// fastest on this device. Keys come from contraction_tuning_key(); the file is JSON
// ({"kiln_tuning": 1, "entries": {key: {config fields, "ms", "rule_ms", "candidates"}}}), written
// atomically (temp file + rename). A missing file is an empty table; an unreadable, truncated or
// garbage file is ignored with a note (and replaced on the next save), never trusted.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "heuristics/contraction_config.hpp"

namespace kiln {

struct TuningEntry {
  ContractionConfig config;
  double ms = 0;       // the winner's median time at tuning
  double rule_ms = 0;  // the rules' choice, same run
  int candidates = 0;  // configs measured
};

// The shape class of a contraction: the GEMM view and everything that decides its tiling (the
// conv geometry, dtype, arch, SM count; M exactly when concrete, else "~estimate").
// `structure`: a description of the problem beyond the GEMM dims (conv filter/stride/padding...).
std::string contraction_tuning_key(const ContractionProblemInfo& p, const std::string& structure);
// The table key of shape class `key` measured on the device named `device` (DeviceInfo::name,
// "NVIDIA H200"): results are kept per device, since GPUs of one arch and SM count (an H100 and an
// H200, a MIG instance and another) tune apart.
std::string device_tuning_key(const std::string& key, const std::string& device);

class TuningTable {
 public:
  TuningTable() = default;
  // Loads `path` (may not exist). `note` receives why a present file was ignored.
  explicit TuningTable(std::string path, std::string* note = nullptr);
  const std::string& path() const { return path_; }
  std::optional<TuningEntry> find(const std::string& key) const;
  // The entry of shape class `key` for the device named `device` (device_tuning_key). With
  // `device` empty (no device: compile only, `kiln cache warm` for deployment) the class's entry
  // of any device (the first by name), else one keyed by the class alone (older files).
  std::optional<TuningEntry> find_for(const std::string& key, const std::string& device) const;
  void put(const std::string& key, const TuningEntry& e);
  // Writes the table to path() atomically; throws kiln::Error(User) naming the path on failure.
  void save() const;
  size_t size() const;

  // JSON text of the table (tests) and its parse (false on anything malformed).
  std::string to_json() const;
  static bool parse(const std::string& text, std::map<std::string, TuningEntry>* out);

 private:
  std::string path_;
  mutable std::mutex mu_;
  std::map<std::string, TuningEntry> entries_;
};

}  // namespace kiln
