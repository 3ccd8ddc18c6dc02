// kiln._kiln.Engine / EngineOptions / CompiledGraph over kiln/engine.hpp. Device tensors come in
// as (pointer, shape) pairs: kiln/compiled.py checks dtypes, devices and strides of torch tensors
// against the graph before it calls run().
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "kiln/engine.hpp"

namespace kiln::py {

namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;
using Buffers = std::map<std::string, std::pair<uint64_t, std::vector<int64_t>>>;

std::map<std::string, DeviceTensor> device_tensors(const Buffers& b) {
  std::map<std::string, DeviceTensor> out;
  for (const auto& [name, pb] : b) out[name] = DeviceTensor{pb.first, pb.second};
  return out;
}

nb::dict stats_dict(const EngineStats& s) {
  nb::dict d;
  d["plans"] = s.plans;
  d["nvrtc_compiles"] = s.nvrtc_compiles;
  d["memory_cache_hits"] = s.memory_cache_hits;
  d["disk_cache_hits"] = s.disk_cache_hits;
  d["nvrtc_ms"] = s.nvrtc_ms;
  d["graph_cache_hits"] = s.graph_cache_hits;
  d["specializations"] = s.specializations;
  d["specialized_runs"] = s.specialized_runs;
  d["autotune_measured"] = s.autotune_measured;
  d["autotune_reused"] = s.autotune_reused;
  d["passes_ms"] = s.passes_ms;
  d["codegen_ms"] = s.codegen_ms;
  d["cache_ms"] = s.cache_ms;
  d["load_ms"] = s.load_ms;
  return d;
}

nb::list kernel_list(const CompiledGraph& c) {
  nb::list out;
  for (const KernelInfo& k : c.kernels()) {
    nb::dict d;
    d["name"] = k.name;
    d["group"] = k.group;
    d["nodes"] = k.nodes;
    d["compile_ms"] = k.compile_ms;
    d["cache"] = k.cache;
    d["bytes_moved"] = k.bytes_moved;
    d["flops"] = k.flops;
    d["tuning"] = k.tuning;
    out.append(d);
  }
  return out;
}

void bind_options(nb::module_& m) {
  nb::class_<EngineOptions>(m, "EngineOptions")
      .def(nb::init<>())
      .def_rw("device", &EngineOptions::device)
      .def_rw("use_current_context", &EngineOptions::use_current_context)
      .def_rw("arch", &EngineOptions::arch)
      .def_rw("fusion", &EngineOptions::fusion)
      .def_rw("disk_cache", &EngineOptions::disk_cache)
      .def_rw("cache_dir", &EngineOptions::cache_dir)
      .def_rw("load_kernels", &EngineOptions::load_kernels)
      .def_rw("specialize_after", &EngineOptions::specialize_after)
      .def_rw("cuda_graphs", &EngineOptions::cuda_graphs)
      .def_rw("schedule", &EngineOptions::schedule)
      .def_rw("autotune", &EngineOptions::autotune)
      .def_rw("tuning_file", &EngineOptions::tuning_file);
}

}  // namespace

void bind_engine(nb::module_& m) {
  bind_options(m);
  nb::class_<CompiledGraph>(m, "CompiledGraph")
      .def("kernels", &kernel_list)
      .def(
          "bind",
          [](const CompiledGraph& c, const Shapes& input_shapes, const Bindings& extra) {
            return c.graph().bind(input_shapes, extra);
          },
          nb::arg("input_shapes"), nb::arg("extra") = Bindings{})
      .def("output_shapes", &CompiledGraph::output_shapes, nb::arg("bindings"))
      .def("workspace_size", &CompiledGraph::workspace_size, nb::arg("bindings"))
      .def(
          "run",
          [](const CompiledGraph& c, const Buffers& inputs, const Buffers& outputs, uint64_t stream,
             uint64_t workspace) {
            auto in = device_tensors(inputs);
            auto out = device_tensors(outputs);
            nb::gil_scoped_release unlocked;
            c.run(in, out, reinterpret_cast<void*>(stream), workspace);
          },
          nb::arg("inputs"), nb::arg("outputs"), nb::arg("stream") = 0, nb::arg("workspace") = 0);

  nb::class_<Engine>(m, "Engine")
      .def(nb::init<EngineOptions>(), nb::arg("options") = EngineOptions{})
      .def(
          "compile",
          [](Engine& e, const Graph& g) {
            nb::gil_scoped_release unlocked;
            return e.compile(g);
          },
          nb::arg("graph"), nb::keep_alive<0, 1>())
      .def("stats", [](const Engine& e) { return stats_dict(e.stats()); })
      .def("has_device", &Engine::has_device)
      .def("arch", &Engine::arch)
      .def("device", &Engine::device);
}

}  // namespace kiln::py
