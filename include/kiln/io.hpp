// Graph files (../shared/GRAPH_FORMAT.md, version 1) and safetensors files.
#pragma once

#include <map>
#include <string>

#include "kiln/graph.hpp"

namespace kiln {

// Loads and validates a graph file. Constant files are resolved relative to the graph file.
// Every problem is a kiln::Error (User) whose message starts with the path and names the place.
Graph load_graph_file(const std::string& path);
// The same from text; `source_name` is used in messages, `base_dir` resolves constant files.
Graph load_graph_string(const std::string& text, const std::string& source_name = "<string>",
                        const std::string& base_dir = ".");
// Serializes to the graph-file form; loading the result gives the same graph. The string form
// holds every constant's values inline; the file form writes float constants of more than 256
// elements to <stem>.safetensors beside the graph file (referenced by "file"), so that a model's
// weights stay exact and binary and the graph file stays small.
std::string save_graph_string(const Graph& g);
void save_graph_file(const Graph& g, const std::string& path);

// Safetensors: every tensor in its logical shape, row-major, f32/f16/bf16.
std::map<std::string, HostTensor> read_safetensors(const std::string& path);
// Writes tensors (converted to row-major logical order) sorted by name.
void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors);

}  // namespace kiln
