// `kiln cache stats|clear|warm`: the on-disk kernel cache (kiln/kernel_cache.hpp), and warming
// it with every kernel a graph needs through an Engine that only compiles.
#include <fmt/format.h>

#include "kiln/engine.hpp"
#include "kiln/environment.hpp"
#include "kiln/io.hpp"
#include "kiln/kernel_cache.hpp"
#include "kiln/nvrtc.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_gpu.hpp"

namespace kiln::cli {
namespace {

// --shape values of `cache warm`: "N=1,8,32" lists values of N; "N=8,seq=16,128" two symbols.
// Every combination of the listed values is one binding.
std::vector<Bindings> warm_bindings(const std::vector<std::string>& values, const Graph& g) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> lists;
  for (const std::string& v : values) {
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      std::string item =
          v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      size_t eq = item.find('=');
      if (eq != std::string::npos) {
        // Validates the symbol and the value (one of the graph's symbols, a positive integer).
        Bindings one = parse_shape_flags("cache", {item}, g);
        lists.emplace_back(one.begin()->first, std::vector<int64_t>{one.begin()->second});
      } else {
        if (lists.empty())
          usage_error("cache",
                      fmt::format("--shape {}: expected SYM=V[,V...], found '{}'", v, item));
        lists.back().second.push_back(parse_int("cache", "--shape", item, 1));
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::vector<Bindings> out(1);
  for (const auto& [sym, vals] : lists) {
    std::vector<Bindings> next;
    for (const Bindings& b : out)
      for (int64_t v : vals) {
        Bindings c = b;
        c[sym] = v;
        next.push_back(std::move(c));
      }
    out = std::move(next);
  }
  return out;
}

std::string bindings_text(const Bindings& b) {
  std::string s;
  for (const auto& [k, v] : b) s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, v);
  return s.empty() ? "static shapes" : s;
}

// `kiln cache warm GRAPH --shape N=1,8,32`: every kernel the graph needs, compiled to the disk
// cache (no GPU needed).
int run_cache_warm(const Args& a) {
  KILN_CHECK(a.positional.size() == 2, "cache warm: expected a graph file: kiln cache warm GRAPH");
  Graph g = load_graph_file(a.positional[1]);
  std::vector<Bindings> binds = warm_bindings(a.all("--shape"), g);
  EngineOptions eo;
  if (a.has("--device")) {
    eo.device = parse_device_flag("cache warm", a.get("--device"), /*allow_cpu=*/false).ordinal;
    require_gpu("cache warm", eo.device);
  }
  eo.arch = a.get("--arch");
  eo.load_kernels = false;
  eo.cache_dir = a.get("--dir");
  eo.fusion = !a.has("--no-fusion");
  Engine e(eo);
  KILN_CHECK(!check_environment().disk_cache_disabled,
             "cache warm: KILN_DISABLE=disk_cache is set: nothing would be written");
  fmt::print("warming {} for {} ({} binding{})\n", a.positional[1], e.arch(), binds.size(),
             binds.size() == 1 ? "" : "s");
  EngineStats before{};
  for (const Bindings& b : binds) {
    for (const std::string& sym : g.symbols())
      KILN_CHECK(b.count(sym), "cache warm: symbol {} of graph '{}' is not bound; add --shape {}=V",
                 sym, g.name(), sym);
    CompiledGraph cg = e.compile(g);
    int64_t ws = cg.workspace_size(b);  // every launch expression evaluates for this binding
    EngineStats st = e.stats();
    fmt::print("  {}: {} kernel{}, workspace {} bytes: {} nvrtc, {} disk, {} memory{}\n",
               bindings_text(b), cg.kernels().size(), cg.kernels().size() == 1 ? "" : "s", ws,
               st.nvrtc_compiles - before.nvrtc_compiles,
               st.disk_cache_hits - before.disk_cache_hits,
               st.memory_cache_hits - before.memory_cache_hits,
               st.graph_cache_hits > before.graph_cache_hits ? " (graph cache hit)" : "");
    before = st;
    if (a.has("--specialize") && !g.symbols().empty()) {
      CompiledGraph sp = e.compile(specialize_graph(g, b));
      st = e.stats();
      fmt::print("  {} specialized: {} kernel{}: {} nvrtc, {} disk, {} memory\n", bindings_text(b),
                 sp.kernels().size(), sp.kernels().size() == 1 ? "" : "s",
                 st.nvrtc_compiles - before.nvrtc_compiles,
                 st.disk_cache_hits - before.disk_cache_hits,
                 st.memory_cache_hits - before.memory_cache_hits);
      before = st;
    }
  }
  EngineStats st = e.stats();
  KernelCacheInfo cache = kernel_cache_info(a.get("--dir"));
  fmt::print(
      "total: {} plans, {} nvrtc compiles ({:.0f} ms), {} disk cache hits, {} memory cache hits, "
      "{} graph cache hits\ncache {}: {} entries\n",
      st.plans, st.nvrtc_compiles, st.nvrtc_ms, st.disk_cache_hits, st.memory_cache_hits,
      st.graph_cache_hits, cache.dir, cache.entries);
  return 0;
}

int run_cache(const std::vector<std::string>& argv) {
  Args a = parse_args("cache", argv,
                      {{"--dir", true, false},
                       {"--shape", true, true},
                       {"--arch", true, false},
                       {"--device", true, false},
                       {"--specialize", false, false},
                       {"--no-fusion", false, false}},
                      1, 2);
  const std::string& what = a.positional[0];
  KILN_CHECK(what == "stats" || what == "clear" || what == "warm",
             "cache: expected 'stats', 'clear' or 'warm', found '{}'", what);
  if (what == "warm") return run_cache_warm(a);
  KILN_CHECK(a.positional.size() == 1 && !a.has("--shape") && !a.has("--arch") &&
                 !a.has("--device") && !a.has("--specialize") && !a.has("--no-fusion"),
             "cache {}: takes only --dir (GRAPH, --shape, --arch, --device, --specialize and "
             "--no-fusion are for 'cache warm')",
             what);
  if (what == "clear") {
    const std::string dir = kernel_cache_dir(a.get("--dir"));
    int64_t n = clear_kernel_cache(dir);
    fmt::print("removed {} entr{} from {}\n", n, n == 1 ? "y" : "ies", dir);
    return 0;
  }
  KernelCacheInfo s = kernel_cache_info(a.get("--dir"));
  fmt::print("kernel cache {}\n  entries: {}\n  bytes:   {}\n  nvrtc:   {}\n", s.dir, s.entries,
             s.bytes, nvrtc_version());
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    cache, "cache", "show, clear or warm (precompile a graph into) the on-disk kernel cache",
    "usage: kiln cache stats|clear [--dir DIR]\n"
    "       kiln cache warm GRAPH [--shape SYM=V[,V...] ...] [--arch sm_XX] [--dir DIR]\n"
    "                             [--device gpu:N] [--specialize] [--no-fusion]\n\n"
    "The cache lives in $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.\n\n"
    "warm compiles every kernel GRAPH needs into the disk cache ahead of time (no GPU\n"
    "needed), for every combination of the listed values (--shape N=1,8,32), and prints\n"
    "what each binding compiled. Kernels depend on the graph's structure, dtypes, layouts\n"
    "and static dims, never on the values of symbolic dims, so the first binding compiles\n"
    "and the others are graph cache hits. --specialize also compiles the variant with each\n"
    "binding's dims baked in (what EngineOptions.specialize_after builds for a hot shape).\n"
    "--arch defaults to the device's own (GPU 0, or GPU N with --device gpu:N), or sm_90\n"
    "without a device. The disk cache is shared by every device of an arch.\n",
    run_cache);

}  // namespace kiln::cli
