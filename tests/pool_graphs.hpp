// Pool graphs shared by the CPU codegen tests and the GPU op harness.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::test {

// Two avgpool outputs of x: 2x3 with asymmetric padding (valid taps counted), and 3x3 stride 1
// counting the padding.
inline void add_avgpools(Graph& g, Tensor x) {
  Pool2dOptions a;
  a.kernel = {2, 3};
  a.padding = {1, 0, 0, 2};
  g.output(g.avgpool2d(x, a));
  g.output(g.add_node1("avgpool2d", {x},
                       {{"kernel", std::vector<int64_t>{3, 3}},
                        {"padding", std::vector<int64_t>{1, 1}},
                        {"stride", std::vector<int64_t>{1, 1}},
                        {"count_include_pad", int64_t{1}}}));
}

}  // namespace kiln::test
