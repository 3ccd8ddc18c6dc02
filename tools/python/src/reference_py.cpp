// The CPU reference, the plan without building (explain), the device probe and the environment
// check: kiln/reference.hpp, kiln/lowering.hpp, kiln/device.hpp, kiln/environment.hpp.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "kiln/device.hpp"
#include "kiln/environment.hpp"
#include "kiln/lowering.hpp"
#include "kiln/reference.hpp"
#include "py_convert.hpp"

namespace kiln::py {

namespace {

// inputs: name -> (dtype, shape, C-contiguous buffer) of each graph input.
nb::dict run_reference_py(const Graph& g, const nb::dict& inputs, const Bindings& bindings,
                          int threads) {
  std::map<std::string, HostTensor> in;
  for (auto [k, v] : inputs) {
    std::string name = nb::cast<std::string>(k);
    std::string where = "graph '" + g.name() + "': input '" + name + "'";
    auto spec = nb::cast<nb::tuple>(v);
    KILN_PY_CHECK(spec.size() == 3, where + ": expected (dtype, shape, data)");
    DType dt = dtype_from(nb::cast<std::string>(spec[0]), where);
    auto shape = nb::cast<std::vector<int64_t>>(spec[1]);
    in[name] = host_tensor_from(dt, shape, spec[2], where);
  }
  std::map<std::string, HostTensor> out;
  {
    nb::gil_scoped_release unlocked;
    out = run_reference(g, in, ReferenceOptions{bindings, threads});
  }
  nb::dict d;
  for (const auto& [name, t] : out) d[name.c_str()] = host_tensor_to(t);
  return d;
}

std::vector<std::string> names(const Graph& g, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(g.tensor(id).name);
  return out;
}

nb::dict lowering_dict(const Lowering& l) {
  const Graph& g = *l.graph;
  nb::list groups;
  for (const LoweredGroup& gr : l.groups) {
    nb::dict d;
    d["id"] = gr.id;
    d["kind"] = gr.kind;
    d["name"] = gr.name;
    std::vector<std::string> nodes;
    for (int n : gr.nodes) nodes.push_back(g.nodes()[n].name);
    d["nodes"] = nodes;
    d["inputs"] = names(g, gr.inputs);
    d["outputs"] = names(g, gr.outputs);
    d["why"] = gr.why;
    groups.append(d);
  }
  nb::list kernels;
  for (const LoweredKernel& k : l.kernels) {
    nb::dict d;
    d["name"] = k.name;
    d["group"] = k.group;
    d["arch"] = k.arch;
    d["grid"] = std::vector<std::string>{k.grid[0].str(), k.grid[1].str(), k.grid[2].str()};
    d["block"] = std::vector<int>{k.block[0], k.block[1], k.block[2]};
    d["smem_bytes"] = k.smem_bytes;
    d["bytes_moved"] = k.bytes_moved.str();
    d["flops"] = k.flops.str();
    kernels.append(d);
  }
  nb::dict out;
  out["text"] = l.plan_text;
  out["passes"] = l.passes_note;
  out["groups"] = groups;
  out["kernels"] = kernels;
  return out;
}

nb::dict explain_py(const Graph& g, const std::string& arch, bool fusion,
                    const std::string& schedule) {
  LoweringOptions o;
  o.target = default_device(arch.empty() ? "sm_90" : arch, "explain(arch=...)");
  o.fusion = fusion;
  o.schedule = schedule;
  Lowering l;
  {
    nb::gil_scoped_release unlocked;
    l = lower_graph(g, o);
  }
  return lowering_dict(l);
}

nb::dict environment_py() {
  Environment e = check_environment();
  nb::dict d;
  d["fusion_disabled"] = e.fusion_disabled;
  d["autotune_disabled"] = e.autotune_disabled;
  d["disk_cache_disabled"] = e.disk_cache_disabled;
  d["cache_dir"] = e.cache_dir;
  d["schedule"] = e.schedule;
  d["nvtx"] = e.nvtx;
  d["dump_partition"] = e.dump_partition;
  return d;
}

}  // namespace

void bind_reference(nb::module_& m) {
  m.def("_run_reference", &run_reference_py, nb::arg("graph"), nb::arg("inputs"),
        nb::arg("bindings") = Bindings{}, nb::arg("threads") = 0);
  m.def("_explain", &explain_py, nb::arg("graph"), nb::arg("arch") = "", nb::arg("fusion") = true,
        nb::arg("schedule") = "");
  m.def("cuda_available", []() {
    std::string reason;
    bool ok = cuda_available(&reason);
    return std::make_pair(ok, reason);
  });
  m.def("_check_environment", &environment_py);
}

}  // namespace kiln::py
