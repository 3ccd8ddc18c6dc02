// Compiles every kernel of a list of graphs with NVRTC for sm_80 and sm_90, after the Engine's
// passes, fused and not: one program per arch (one prelude, each kernel body renamed to a
// unique entry), so that hundreds of kernels cost two compiles. Failures are gtest failures.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"

namespace kiln::test {

using GraphBuilder = std::function<std::shared_ptr<Graph>()>;

// Returns the number of kernels compiled (both archs counted).
inline int compile_every_kernel(const std::vector<GraphBuilder>& builds,
                                const std::string& program) {
  const std::string& prelude = device_file("kiln_prelude.cuh");
  std::map<int, std::string> bodies;
  int count = 0;
  for (const GraphBuilder& build : builds)
    for (bool fusion : {true, false}) {
      std::shared_ptr<const Graph> f = apply_engine_passes(build(), fusion);
      PlanOptions po;
      po.fusion = fusion;
      Plan p = plan_fusion(*f, po);
      for (int sm : {80, 90}) {
        CodegenOptions co;
        co.sm = sm;
        for (const KernelSpec& k : generate_kernels(*f, p, co)) {
          EXPECT_EQ(k.source.compare(0, prelude.size(), prelude), 0) << k.name;
          std::string body = k.source.substr(prelude.size());
          size_t at = body.find(" " + k.entry + "(");
          EXPECT_NE(at, std::string::npos) << k.entry;
          if (at == std::string::npos) continue;
          body.replace(at + 1, k.entry.size(), fmt::format("{}_b{}", k.entry, count++));
          bodies[sm] += body;
        }
      }
    }
  for (const auto& [sm, src] : bodies) {
    try {
      EXPECT_FALSE(nvrtc_compile(prelude + src, program, fmt::format("sm_{}", sm)).cubin.empty());
    } catch (const Error& e) {
      ADD_FAILURE() << "sm_" << sm << ": " << e.what();
    }
  }
  return count;
}

}  // namespace kiln::test
