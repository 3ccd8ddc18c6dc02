// The CPU tests of graph passes: the rewritten graph computes what the original does.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "tests/random_input.hpp"

namespace kiln::test {

// Every input random at N = 3 (other symbols must not occur), both graphs through the CPU
// reference (f64 math rounded to each tensor's dtype, so the two agree to the last bit unless
// the rewrite rounds elsewhere: `rtol`), every output compared; NaN never passes.
inline void expect_same_values(const Graph& before, const Graph& after, double rtol = 1e-9) {
  std::map<std::string, HostTensor> in;
  uint64_t seed = 31;
  for (int id : before.inputs()) {
    const TensorInfo& t = before.tensor(id);
    std::vector<int64_t> shape = eval_shape(t.desc.shape, {{"N", 3}});
    in[t.name] = random_input(t.desc.dtype, shape, t.desc.layout, seed++);
  }
  auto want = run_reference(before, in);
  auto got = run_reference(after, in);
  ASSERT_EQ(want.size(), got.size());
  for (auto& [name, w] : want) {
    std::vector<double> a = got.at(name).to_f64(), b = w.to_f64();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_FALSE(std::isnan(a[i])) << name << " [" << i << "]";
      ASSERT_NEAR(a[i], b[i], rtol * (1 + std::abs(b[i]))) << name << " [" << i << "]";
    }
  }
}

}  // namespace kiln::test
