// `kiln emit GRAPH --out DIR`: every generated kernel's CUDA source (kiln/lowering.hpp), and
// with --compile its NVRTC compile (kiln/nvrtc.hpp).
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "kiln/io.hpp"
#include "kiln/lowering.hpp"
#include "kiln/nvrtc.hpp"
#include "tools/cli_common.hpp"

namespace kiln::cli {
namespace {

// The kernels of the plan, and with `candidates` every autotune candidate of each conv/matmul
// too, named by group and config index.
std::vector<LoweredKernel> kernels_to_emit(Lowering&& low, bool candidates) {
  std::vector<LoweredKernel> ks = std::move(low.kernels);
  if (candidates)
    for (LoweredTuningSite& site : low.tuning_sites)
      for (size_t i = 0; i < site.kernels.size(); ++i) {
        LoweredKernel k = std::move(site.kernels[i]);
        k.name = fmt::format("candidate_g{}_{}_{}", site.group, i, k.name);
        ks.push_back(std::move(k));
      }
  return ks;
}

int run_emit(const std::vector<std::string>& argv) {
  Args a = parse_args("emit", argv,
                      {{"--out", true, false},
                       {"--arch", true, false},
                       {"--no-fusion", false, false},
                       {"--compile", false, false},
                       {"--candidates", false, false}},
                      1, 1);
  KILN_CHECK(a.has("--out"), "emit: --out DIR is required");
  LoweringOptions lo;
  lo.target = default_device(a.get("--arch", "sm_90"), "--arch");
  lo.fusion = !a.has("--no-fusion");
  lo.tuning_sites = a.has("--candidates");
  lo.planned = [](const Lowering& l) {
    if (!l.passes_note.empty()) fmt::print("# {}\n", l.passes_note);
  };
  std::vector<LoweredKernel> ks =
      kernels_to_emit(lower_graph(load_graph_file(a.positional[0]), lo), a.has("--candidates"));
  std::filesystem::path dir = a.get("--out");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  KILN_CHECK(!ec, "emit: --out {}: cannot create the directory: {}", dir.string(), ec.message());
  if (a.has("--compile"))
    fmt::print("nvrtc {}: one-time start in this process {:.0f} ms\n", nvrtc_version(),
               nvrtc_start_ms());
  for (const LoweredKernel& k : ks) {
    std::filesystem::path f = dir / (k.name + ".cu");
    std::ofstream os(f);
    os << k.source;
    KILN_CHECK(os.good(), "emit: cannot write {}", f.string());
    std::string compiled;
    if (a.has("--compile")) {
      NvrtcResult r = nvrtc_compile(k.source, k.name, k.arch);
      compiled =
          fmt::format("  (nvrtc {}: {:.0f} ms, {} byte cubin)", k.arch, r.ms, r.cubin.size());
    }
    fmt::print("{}{}\n", f.string(), compiled);
  }
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    emit, "emit", "write each generated kernel's CUDA source",
    "usage: kiln emit GRAPH --out DIR [--arch sm_XX] [--no-fusion] [--compile] [--candidates]\n\n"
    "Writes DIR/<kernel name>.cu for every kernel of the plan (the kernels the Engine\n"
    "builds for --arch, default sm_90: sm_90a wgmma contractions there); --compile also\n"
    "compiles each with NVRTC, one after the other, and prints the time. --candidates\n"
    "also writes every autotune candidate of each conv/matmul group\n"
    "(candidate_g<group>_<index>_<kernel name>.cu).\n",
    run_emit);

}  // namespace kiln::cli
