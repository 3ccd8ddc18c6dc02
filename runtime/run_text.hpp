// How the executor's messages print bindings, shapes and tensor names.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

inline std::string bindings_str(const Bindings& b) {
  std::string s;
  for (const auto& [k, v] : b) s += fmt::format("{}{}={}", s.empty() ? "" : ", ", k, v);
  return s.empty() ? "static shapes" : s;
}

inline std::string shape_text(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ","));
}

inline std::string names_of(const Graph& g, const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + g.tensor(id).name;
  return s.empty() ? "(none)" : s;
}

}  // namespace kiln
