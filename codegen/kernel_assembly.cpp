#include "codegen/kernel_assembly.hpp"

#include <fmt/format.h>

#include <string_view>

namespace kiln {

std::string kernel_declaration(const KernelDecl& d) {
  std::string cluster = d.cluster > 0 ? fmt::format("__cluster_dims__({}, 1, 1) ", d.cluster) : "";
  std::string bounds =
      d.min_blocks > 0 ? fmt::format("{}, {}", d.max_threads, d.min_blocks) : d.max_threads;
  return fmt::format("extern \"C\" __global__ void {}__launch_bounds__({}) {}({}) {{", cluster,
                     bounds, d.entry, d.params);
}

std::string assemble_kernel(const std::string& device, const KernelDecl& d,
                            const std::string& body) {
  std::string src = device;
  src += kernel_declaration(d);
  src += '\n';
  std::string_view rest = body;
  while (!rest.empty()) {  // one level of indentation; empty lines stay empty
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    if (!line.empty()) src += "  ";
    src += line;
    src += '\n';
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  src += "}\n";
  return src;
}

KernelSpec assembled_kernel(const std::string& device, const KernelDecl& d, const std::string& body,
                            int threads, Dim grid) {
  KernelSpec k;
  k.name = d.entry;
  k.entry = d.entry;
  k.source = assemble_kernel(device, d, body);
  k.block = {threads, 1, 1};
  k.grid = {std::move(grid), Dim(1), Dim(1)};
  return k;
}

}  // namespace kiln
