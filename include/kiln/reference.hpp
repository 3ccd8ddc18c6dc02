// The CPU reference executor: runs any valid graph, computing in f64 and rounding every stored
// tensor to its declared dtype. The oracle for every GPU test and the CLI's answer without a GPU.
#pragma once

#include <map>
#include <string>

#include "kiln/graph.hpp"

namespace kiln {

struct ReferenceOptions {
  Bindings bindings;  // extra symbol values (others are bound from the input shapes)
  int threads = 0;    // 0 = hardware concurrency
};

// `inputs` by name, in any layout/strides, with each input's declared dtype and a logical shape
// that matches its declared one. Returns every graph output by name, in its declared layout.
std::map<std::string, HostTensor> run_reference(const Graph& g,
                                                const std::map<std::string, HostTensor>& inputs,
                                                const ReferenceOptions& opts = {});

}  // namespace kiln
