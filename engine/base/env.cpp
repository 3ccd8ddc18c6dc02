#include "engine/base/env.hpp"

#include <filesystem>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/base/check.hpp"

extern char** environ;

namespace kiln {

namespace {

struct ListItem {
  const char* name;
  bool EnvConfig::*field;
};

const std::vector<ListItem>& dump_items() {
  static const std::vector<ListItem> items = {{"plan", &EnvConfig::dump_plan},
                                              {"cuda", &EnvConfig::dump_cuda},
                                              {"ptx", &EnvConfig::dump_ptx},
                                              {"launch", &EnvConfig::dump_launch},
                                              {"tune", &EnvConfig::dump_tune}};
  return items;
}

const std::vector<ListItem>& disable_items() {
  static const std::vector<ListItem> items = {{"fusion", &EnvConfig::disable_fusion},
                                              {"autotune", &EnvConfig::disable_autotune},
                                              {"disk_cache", &EnvConfig::disable_disk_cache}};
  return items;
}

std::string item_names(const std::vector<ListItem>& items) {
  std::string s;
  for (const ListItem& it : items) s += (s.empty() ? "" : ", ") + std::string(it.name);
  return s;
}

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

void parse_list(const std::string& var, const std::string& value,
                const std::vector<ListItem>& items, EnvConfig* cfg) {
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string::npos) comma = value.size();
    std::string item = trim(std::string_view(value).substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;  // "a,,b" and a trailing comma are harmless
    bool found = false;
    for (const ListItem& it : items) {
      if (item == it.name) {
        cfg->*(it.field) = true;
        found = true;
      }
    }
    KILN_CHECK(found, "environment variable {}={}: unknown item '{}', expected a comma list of: {}",
               var, value, item, item_names(items));
  }
}

}  // namespace

const char* env_variable_names() {
  return "KILN_DUMP, KILN_DISABLE, KILN_CACHE_DIR, KILN_NVTX, KILN_SCHEDULE";
}

EnvConfig parse_env(const std::map<std::string, std::string>& vars) {
  EnvConfig cfg;
  for (const auto& [name, value] : vars) {
    if (name.rfind("KILN_", 0) != 0) continue;
    if (name == "KILN_DUMP") {
      parse_list(name, value, dump_items(), &cfg);
    } else if (name == "KILN_DISABLE") {
      parse_list(name, value, disable_items(), &cfg);
    } else if (name == "KILN_CACHE_DIR") {
      cfg.cache_dir = value;
    } else if (name == "KILN_NVTX") {
      std::string v = trim(value);
      KILN_CHECK(v == "1" || v == "0" || v.empty(),
                 "environment variable KILN_NVTX={}: expected 1 (NVTX ranges on) or 0 (off)",
                 value);
      cfg.nvtx = v == "1";
    } else if (name == "KILN_SCHEDULE") {
      cfg.schedule = value;  // parsed by the heuristics that own its keys
    } else {
      KILN_FAIL(
          "environment variable {}: unknown kiln variable, expected one of: {} (KILN_DUMP: {}; "
          "KILN_DISABLE: {})",
          name, env_variable_names(), item_names(dump_items()), item_names(disable_items()));
    }
  }
  return cfg;
}

namespace {
std::mutex env_mu;
std::optional<EnvConfig> env_override;
}  // namespace

void set_env_override(const EnvConfig* cfg) {
  std::lock_guard<std::mutex> lock(env_mu);
  if (cfg)
    env_override = *cfg;
  else
    env_override.reset();
}

const EnvConfig& env() {
  static std::optional<EnvConfig> parsed;
  std::lock_guard<std::mutex> lock(env_mu);
  if (env_override) return *env_override;
  if (!parsed) {
    std::map<std::string, std::string> vars;
    for (char** e = environ; e && *e; ++e) {
      std::string_view kv(*e);
      if (kv.rfind("KILN_", 0) != 0) continue;
      size_t eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      vars.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
    parsed = parse_env(vars);  // throws (and stays unparsed) on error
  }
  return *parsed;
}

std::string dump_dir() {
  const EnvConfig& e = env();
  if (!e.cache_dir.empty()) return e.cache_dir;
  std::error_code ec;
  std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  return ec ? std::string("/tmp") : tmp.string();
}

}  // namespace kiln
