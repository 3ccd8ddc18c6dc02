// How every emitter turns its parts into a kernel's source: the one declaration line
// (`extern "C" __global__`, cluster dims, launch bounds, parameters) and the body under it.
#pragma once

#include <string>

#include "codegen/kernel_spec.hpp"

namespace kiln {

struct KernelDecl {
  std::string entry;        // the extern "C" function name
  std::string max_threads;  // __launch_bounds__'s first argument: "256", "KA::THREADS"
  int min_blocks = 0;       // its second argument (0: left out)
  int cluster = 0;          // __cluster_dims__(cluster, 1, 1) (0: no cluster)
  std::string params;       // the parameter list, as the emitter's argument registry wrote it
};

// `extern "C" __global__ void [__cluster_dims__(c, 1, 1) ]__launch_bounds__(t[, b]) entry(params)
// {`
std::string kernel_declaration(const KernelDecl& d);

// `device` (prelude and device helpers, each ending in a newline), then the declaration, `body`
// (a Writer's text at depth 0) indented one level, and the closing brace.
std::string assemble_kernel(const std::string& device, const KernelDecl& d,
                            const std::string& body);

// A kernel of `threads` threads per CTA over a one-dimensional grid of `grid` CTAs: name and
// entry d.entry, source assemble_kernel(device, d, body). Arguments, traffic and shared memory
// are the caller's.
KernelSpec assembled_kernel(const std::string& device, const KernelDecl& d, const std::string& body,
                            int threads, Dim grid);

}  // namespace kiln
