#include "engine/base/env.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
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
  static const std::vector<ListItem> items = {
      {"plan", &EnvConfig::dump_plan}, {"cuda", &EnvConfig::dump_cuda},
      {"ptx", &EnvConfig::dump_ptx},   {"launch", &EnvConfig::dump_launch},
      {"tune", &EnvConfig::dump_tune}, {"partition", &EnvConfig::dump_partition}};
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
  return "KILN_DUMP, KILN_DISABLE, KILN_CACHE_DIR, KILN_MEMORY_BUDGET, KILN_NVTX, KILN_SCHEDULE";
}

void parse_memory_budget(const std::string& value, uint64_t* bytes, double* fraction) {
  std::string v = trim(value);
  auto bad = [&] {
    KILN_FAIL(
        "environment variable KILN_MEMORY_BUDGET={}: expected bytes with an optional K, M, G or "
        "T suffix (powers of 1024, e.g. 8G) or a percentage of physical memory (e.g. 75%)",
        value);
  };
  *bytes = 0;
  *fraction = 0;
  if (v.empty()) return;  // set but empty: the default, like the other variables
  if (v.back() == '%') {
    double pct = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size() - 1, pct);
    if (ec != std::errc() || p != v.data() + v.size() - 1 || !(pct > 0 && pct <= 100)) bad();
    *fraction = pct / 100.0;
    return;
  }
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p == v.data() || n == 0) bad();
  std::string suffix(p, static_cast<const char*>(v.data() + v.size()));
  if (suffix.size() > 1 && (suffix.substr(1) == "B" || suffix.substr(1) == "iB"))
    suffix = suffix.substr(0, 1);
  int shift = suffix.empty() || suffix == "B" ? 0
              : suffix == "K"                 ? 10
              : suffix == "M"                 ? 20
              : suffix == "G"                 ? 30
              : suffix == "T"                 ? 40
                                              : -1;
  if (shift < 0 || n > (UINT64_MAX >> shift)) bad();
  *bytes = n << shift;
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
    } else if (name == "KILN_MEMORY_BUDGET") {
      parse_memory_budget(value, &cfg.memory_budget, &cfg.memory_budget_fraction);
    } else {
      cfg.unknown.push_back(name);  // another tool's variable, or a misspelling: warned about
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
    if (!parsed->unknown.empty()) {
      std::string names;
      for (const std::string& n : parsed->unknown) names += (names.empty() ? "" : ", ") + n;
      std::fprintf(stderr,
                   "kiln: warning: environment variable%s %s: not kiln's, ignored (kiln reads: %s; "
                   "KILN_DUMP: %s; KILN_DISABLE: %s)\n",
                   parsed->unknown.size() == 1 ? "" : "s", names.c_str(), env_variable_names(),
                   item_names(dump_items()).c_str(), item_names(disable_items()).c_str());
    }
  }
  return *parsed;
}

namespace {
// The per-user fallback, in the system temp directory (which everyone shares).
std::string shared_fallback_dir() {
  std::error_code ec;
  std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  return (tmp / fmt::format("kiln-{}", static_cast<unsigned long>(::geteuid()))).string();
}
}  // namespace

std::string kiln_cache_dir() {
  const EnvConfig& e = env();
  if (!e.cache_dir.empty()) return e.cache_dir;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return (std::filesystem::path(xdg) / "kiln").string();
  const char* home = std::getenv("HOME");
  if (home && *home) return (std::filesystem::path(home) / ".cache" / "kiln").string();
  return shared_fallback_dir();
}

bool kiln_cache_dir_is_shared_fallback() {
  return kiln_cache_dir() == shared_fallback_dir();
}

std::string dump_dir() {
  return kiln_cache_dir();
}

}  // namespace kiln
