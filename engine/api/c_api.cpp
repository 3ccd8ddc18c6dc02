// The C ABI (include/kiln/kiln.h): wraps the C++ API; no exception crosses the boundary.
#include "kiln/kiln.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <string>

#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "runtime/cuda_driver.hpp"

struct kiln_graph_t {
  kiln::Graph graph;
};
struct kiln_engine_t {
  explicit kiln_engine_t(const kiln::EngineOptions& o) : engine(o) {}
  kiln::Engine engine;
};
struct kiln_compiled_t {
  kiln::CompiledGraph compiled;
};

namespace {

thread_local std::string g_last_error;

kiln_status fail(kiln_status s, std::string msg) {
  g_last_error = std::move(msg);
  return s;
}

// Runs f, mapping every exception to a status and a message.
template <class F>
kiln_status guarded(F&& f) {
  try {
    g_last_error.clear();
    f();
    return KILN_OK;
  } catch (const kiln::Error& e) {
    switch (e.kind()) {
      case kiln::ErrorKind::User:
        return fail(KILN_ERROR_USER, e.what());
      case kiln::ErrorKind::Driver:
        return fail(KILN_ERROR_DRIVER, e.what());
      case kiln::ErrorKind::Internal:
        return fail(KILN_ERROR_INTERNAL, e.what());
    }
    return fail(KILN_ERROR_INTERNAL, e.what());
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return fail(KILN_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(KILN_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

#define KILN_C_REQUIRE(ptr)                                                  \
  do {                                                                       \
    if ((ptr) == nullptr) return fail(KILN_ERROR_ARGUMENT, #ptr " is NULL"); \
  } while (0)

std::map<std::string, kiln::DeviceTensor> to_map(const kiln_tensor* t, int32_t n,
                                                 const char* what) {
  std::map<std::string, kiln::DeviceTensor> m;
  if (n > 0 && t == nullptr)
    throw kiln::Error(kiln::ErrorKind::User, std::string(what) + ": array is NULL");
  for (int32_t i = 0; i < n; ++i) {
    if (t[i].name == nullptr)
      throw kiln::Error(kiln::ErrorKind::User,
                        std::string(what) + "[" + std::to_string(i) + "].name is NULL");
    if (t[i].rank < 0 || t[i].rank > KILN_MAX_RANK)
      throw kiln::Error(kiln::ErrorKind::User, std::string(what) + "[" + std::to_string(i) +
                                                   "] ('" + t[i].name + "'): rank " +
                                                   std::to_string(t[i].rank) + " out of range");
    kiln::DeviceTensor d;
    d.ptr = t[i].ptr;
    d.shape.assign(t[i].shape, t[i].shape + t[i].rank);
    if (!m.emplace(t[i].name, d).second)
      throw kiln::Error(kiln::ErrorKind::User,
                        std::string(what) + ": tensor '" + t[i].name + "' given twice");
  }
  return m;
}

kiln::Bindings bind(const kiln_compiled_t* c, const kiln_tensor* inputs, int32_t n_inputs,
                    const char* const* symbols, const int64_t* values, int32_t n_symbols) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, d] : to_map(inputs, n_inputs, "inputs")) shapes[name] = d.shape;
  kiln::Bindings extra;
  for (int32_t i = 0; i < n_symbols; ++i) {
    if (symbols == nullptr || values == nullptr || symbols[i] == nullptr)
      throw kiln::Error(kiln::ErrorKind::User, "symbols/values: NULL entry");
    extra[symbols[i]] = values[i];
  }
  return c->compiled.graph().bind(shapes, extra);
}

// The size of kiln_engine_options before `device` (what kiln 0.1.0's header declared).
constexpr size_t kOptionsSizeV1 = offsetof(kiln_engine_options, device);

// True when `field` (at `offset`, `bytes` long) lies within a caller's struct of `size` bytes.
constexpr bool within(size_t size, size_t offset, size_t bytes) {
  return offset + bytes <= size;
}
#define KILN_C_HAS(size, field) \
  within(size, offsetof(kiln_engine_options, field), sizeof(kiln_engine_options::field))

kiln::EngineOptions engine_options(const kiln_engine_options* opts, size_t size) {
  kiln::EngineOptions o;
  if (opts == nullptr) return o;
  if (opts->arch != nullptr) o.arch = opts->arch;
  o.fusion = opts->fusion != 0;
  o.disk_cache = opts->disk_cache != 0;
  if (opts->cache_dir != nullptr) o.cache_dir = opts->cache_dir;
  o.load_kernels = opts->load_kernels != 0;
  o.cuda_graphs = opts->cuda_graphs != 0;
  o.specialize_after = opts->specialize_after;
  o.autotune = opts->autotune != 0;
  if (opts->tuning_file != nullptr) o.tuning_file = opts->tuning_file;
  if (KILN_C_HAS(size, device)) o.device = opts->device;
  if (KILN_C_HAS(size, use_current_context)) o.use_current_context = opts->use_current_context != 0;
  if (KILN_C_HAS(size, deferred_errors)) o.deferred_errors = opts->deferred_errors != 0;
  return o;
}

// The context a device helper runs in: `device`'s primary context, or the caller's current one.
kiln::cuda::Context device_context(int32_t device) {
  if (device == KILN_DEVICE_CURRENT_CONTEXT)
    return kiln::cuda::current_context("KILN_DEVICE_CURRENT_CONTEXT");
  return kiln::cuda::primary_context(device, "device");
}

}  // namespace

extern "C" {

const char* kiln_version(void) {
  return KILN_VERSION;
}
const char* kiln_last_error(void) {
  return g_last_error.c_str();
}

void kiln_engine_options_init(kiln_engine_options* opts, size_t size) {
  if (opts == nullptr || size < kOptionsSizeV1) return;
  kiln_engine_options d;
  (kiln_engine_options_default)(&d);
  d.device = 0;
  d.use_current_context = 0;
  d.deferred_errors = 0;
  std::memcpy(opts, &d, std::min(size, sizeof(d)));
}

void(kiln_engine_options_default)(kiln_engine_options* o) {
  // The 0.1.0 ABI: the caller's struct ends before `device`.
  if (o == nullptr) return;
  o->arch = nullptr;
  o->fusion = 1;
  o->disk_cache = 1;
  o->cache_dir = nullptr;
  o->load_kernels = 1;
  o->cuda_graphs = 0;
  o->specialize_after = 0;
  o->autotune = 0;
  o->tuning_file = nullptr;
}

kiln_status kiln_graph_load_file(const char* path, kiln_graph* out) {
  KILN_C_REQUIRE(path);
  KILN_C_REQUIRE(out);
  *out = nullptr;
  return guarded([&] { *out = new kiln_graph_t{kiln::load_graph_file(path)}; });
}

kiln_status kiln_graph_load_string(const char* json, const char* base_dir, kiln_graph* out) {
  KILN_C_REQUIRE(json);
  KILN_C_REQUIRE(out);
  *out = nullptr;
  return guarded([&] {
    *out = new kiln_graph_t{kiln::load_graph_string(json, "<string>", base_dir ? base_dir : ".")};
  });
}

void kiln_graph_destroy(kiln_graph g) {
  delete g;
}

kiln_status kiln_graph_num_inputs(kiln_graph g, int32_t* n) {
  KILN_C_REQUIRE(g);
  KILN_C_REQUIRE(n);
  *n = static_cast<int32_t>(g->graph.inputs().size());
  return KILN_OK;
}

kiln_status kiln_graph_num_outputs(kiln_graph g, int32_t* n) {
  KILN_C_REQUIRE(g);
  KILN_C_REQUIRE(n);
  *n = static_cast<int32_t>(g->graph.outputs().size());
  return KILN_OK;
}

kiln_status kiln_graph_input_name(kiln_graph g, int32_t i, const char** name) {
  KILN_C_REQUIRE(g);
  KILN_C_REQUIRE(name);
  if (i < 0 || i >= static_cast<int32_t>(g->graph.inputs().size()))
    return fail(KILN_ERROR_ARGUMENT, "input index " + std::to_string(i) + " out of range");
  *name = g->graph.tensor(g->graph.inputs()[i]).name.c_str();
  return KILN_OK;
}

kiln_status kiln_graph_output_name(kiln_graph g, int32_t i, const char** name) {
  KILN_C_REQUIRE(g);
  KILN_C_REQUIRE(name);
  if (i < 0 || i >= static_cast<int32_t>(g->graph.outputs().size()))
    return fail(KILN_ERROR_ARGUMENT, "output index " + std::to_string(i) + " out of range");
  *name = g->graph.tensor(g->graph.outputs()[i]).name.c_str();
  return KILN_OK;
}

kiln_status kiln_engine_create_sized(const kiln_engine_options* opts, size_t size,
                                     kiln_engine* out) {
  KILN_C_REQUIRE(out);
  *out = nullptr;
  if (opts != nullptr && size < kOptionsSizeV1)
    return fail(KILN_ERROR_ARGUMENT, "kiln_engine_create_sized: size " + std::to_string(size) +
                                         " is below the smallest kiln_engine_options (" +
                                         std::to_string(kOptionsSizeV1) + " bytes)");
  return guarded([&] { *out = new kiln_engine_t(engine_options(opts, size)); });
}

kiln_status(kiln_engine_create)(const kiln_engine_options* opts, kiln_engine* out) {
  return kiln_engine_create_sized(opts, kOptionsSizeV1, out);
}

void kiln_engine_destroy(kiln_engine e) {
  delete e;
}

kiln_status kiln_engine_stats(kiln_engine e, kiln_stats* out) {
  KILN_C_REQUIRE(e);
  KILN_C_REQUIRE(out);
  return guarded([&] {
    kiln::EngineStats s = e->engine.stats();
    out->plans = s.plans;
    out->nvrtc_compiles = s.nvrtc_compiles;
    out->memory_cache_hits = s.memory_cache_hits;
    out->disk_cache_hits = s.disk_cache_hits;
    out->graph_cache_hits = s.graph_cache_hits;
    out->specializations = s.specializations;
    out->autotune_measured = s.autotune_measured;
    out->autotune_reused = s.autotune_reused;
  });
}

int32_t kiln_engine_has_device(kiln_engine e) {
  if (e == nullptr) return 0;
  try {
    return e->engine.has_device() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

kiln_status kiln_engine_device(kiln_engine e, int32_t* device) {
  KILN_C_REQUIRE(e);
  KILN_C_REQUIRE(device);
  *device = e->engine.device();
  return KILN_OK;
}

kiln_status kiln_compile(kiln_engine e, kiln_graph g, kiln_compiled* out) {
  KILN_C_REQUIRE(e);
  KILN_C_REQUIRE(g);
  KILN_C_REQUIRE(out);
  *out = nullptr;
  return guarded([&] { *out = new kiln_compiled_t{e->engine.compile(g->graph)}; });
}

void kiln_compiled_destroy(kiln_compiled c) {
  delete c;
}

kiln_status kiln_output_shape(kiln_compiled c, const kiln_tensor* inputs, int32_t n_inputs,
                              const char* const* symbols, const int64_t* values, int32_t n_symbols,
                              const char* output, int32_t* rank, int64_t* shape) {
  KILN_C_REQUIRE(c);
  KILN_C_REQUIRE(output);
  KILN_C_REQUIRE(rank);
  KILN_C_REQUIRE(shape);
  return guarded([&] {
    auto shapes = c->compiled.output_shapes(bind(c, inputs, n_inputs, symbols, values, n_symbols));
    auto it = shapes.find(output);
    if (it == shapes.end())
      throw kiln::Error(kiln::ErrorKind::User,
                        std::string("output '") + output + "' is not an output of the graph");
    *rank = static_cast<int32_t>(it->second.size());
    for (size_t i = 0; i < it->second.size(); ++i) shape[i] = it->second[i];
  });
}

kiln_status kiln_workspace_size(kiln_compiled c, const kiln_tensor* inputs, int32_t n_inputs,
                                const char* const* symbols, const int64_t* values,
                                int32_t n_symbols, uint64_t* bytes) {
  KILN_C_REQUIRE(c);
  KILN_C_REQUIRE(bytes);
  return guarded([&] {
    *bytes = static_cast<uint64_t>(
        c->compiled.workspace_size(bind(c, inputs, n_inputs, symbols, values, n_symbols)));
  });
}

kiln_status kiln_run(kiln_compiled c, const kiln_tensor* inputs, int32_t n_inputs,
                     const kiln_tensor* outputs, int32_t n_outputs, void* stream,
                     uint64_t workspace) {
  KILN_C_REQUIRE(c);
  return guarded([&] {
    c->compiled.run(to_map(inputs, n_inputs, "inputs"), to_map(outputs, n_outputs, "outputs"),
                    stream, workspace);
  });
}

kiln_status kiln_check_errors(kiln_compiled c) {
  KILN_C_REQUIRE(c);
  return guarded([&] { c->compiled.check_errors(); });
}

kiln_status kiln_graph_tensor_dtype(kiln_graph g, const char* name, kiln_dtype* dtype) {
  KILN_C_REQUIRE(g);
  KILN_C_REQUIRE(name);
  KILN_C_REQUIRE(dtype);
  int id = g->graph.find(name);
  if (id < 0)
    return fail(KILN_ERROR_USER,
                std::string("tensor '") + name + "' is not in graph '" + g->graph.name() + "'");
  switch (g->graph.tensor(id).desc.dtype) {
    case kiln::DType::F32:
      *dtype = KILN_F32;
      break;
    case kiln::DType::F16:
      *dtype = KILN_F16;
      break;
    case kiln::DType::BF16:
      *dtype = KILN_BF16;
      break;
    case kiln::DType::I32:
      *dtype = KILN_I32;
      break;
    case kiln::DType::I64:
      *dtype = KILN_I64;
      break;
    case kiln::DType::Bool:
      *dtype = KILN_BOOL;
      break;
  }
  return KILN_OK;
}

kiln_status kiln_run_host(kiln_graph g, const kiln_host_tensor* inputs, int32_t n_inputs,
                          kiln_host_tensor* outputs, int32_t n_outputs) {
  KILN_C_REQUIRE(g);
  if (n_inputs > 0) KILN_C_REQUIRE(inputs);
  if (n_outputs > 0) KILN_C_REQUIRE(outputs);
  if (n_inputs < 0 || n_outputs < 0)
    return fail(KILN_ERROR_ARGUMENT, "n_inputs/n_outputs must not be negative");
  return guarded([&] {
    const kiln::Graph& graph = g->graph;
    auto where = [](const char* what, int32_t i, const char* name) {
      return std::string(what) + "[" + std::to_string(i) + "]" +
             (name ? std::string(" ('") + name + "')" : std::string());
    };
    std::map<std::string, kiln::HostTensor> in;
    for (int32_t i = 0; i < n_inputs; ++i) {
      const kiln_host_tensor& t = inputs[i];
      if (t.name == nullptr)
        throw kiln::Error(kiln::ErrorKind::User, where("inputs", i, nullptr) + ".name is NULL");
      int id = graph.find(t.name);
      if (id < 0 || graph.tensor(id).role != kiln::TensorRole::Input)
        throw kiln::Error(
            kiln::ErrorKind::User,
            where("inputs", i, t.name) + ": not an input of graph '" + graph.name() + "'");
      if (t.rank < 0 || t.rank > KILN_MAX_RANK)
        throw kiln::Error(kiln::ErrorKind::User, where("inputs", i, t.name) + ": rank " +
                                                     std::to_string(t.rank) + " out of range");
      kiln::DType dt = graph.tensor(id).desc.dtype;
      std::vector<int64_t> shape(t.shape, t.shape + t.rank);
      uint64_t n = 1;
      for (int64_t d : shape) {
        if (d < 0 || (d > 0 && n > (uint64_t{1} << 48) / static_cast<uint64_t>(d)))
          throw kiln::Error(kiln::ErrorKind::User,
                            where("inputs", i, t.name) + ": bad dimension " + std::to_string(d));
        n *= static_cast<uint64_t>(d);
      }
      uint64_t need = n * kiln::dtype_size(dt);
      if (t.bytes != need)
        throw kiln::Error(kiln::ErrorKind::User,
                          where("inputs", i, t.name) + ": " + std::to_string(t.bytes) +
                              " bytes given, the shape needs " + std::to_string(need) + " (" +
                              kiln::dtype_name(dt) + ")");
      if (need > 0 && t.data == nullptr)
        throw kiln::Error(kiln::ErrorKind::User, where("inputs", i, t.name) + ".data is NULL");
      kiln::HostTensor h = kiln::HostTensor::zeros(dt, shape);
      if (need > 0) std::memcpy(h.data.data(), t.data, need);
      if (!in.emplace(t.name, std::move(h)).second)
        throw kiln::Error(kiln::ErrorKind::User, where("inputs", i, t.name) + ": given twice");
    }
    for (int32_t i = 0; i < n_outputs; ++i) {
      const kiln_host_tensor& t = outputs[i];
      if (t.name == nullptr)
        throw kiln::Error(kiln::ErrorKind::User, where("outputs", i, nullptr) + ".name is NULL");
      bool found = false;
      for (int id : graph.outputs()) found = found || graph.tensor(id).name == t.name;
      if (!found)
        throw kiln::Error(
            kiln::ErrorKind::User,
            where("outputs", i, t.name) + ": not an output of graph '" + graph.name() + "'");
    }
    std::map<std::string, kiln::HostTensor> out = kiln::run_reference(graph, in);
    for (int32_t i = 0; i < n_outputs; ++i) {
      kiln_host_tensor& t = outputs[i];
      kiln::HostTensor r = out.at(t.name).relayout(kiln::Layout::NCHW);
      if (r.shape.size() > KILN_MAX_RANK)
        throw kiln::Error(kiln::ErrorKind::User,
                          where("outputs", i, t.name) + ": rank above KILN_MAX_RANK");
      if (t.bytes < r.data.size())
        throw kiln::Error(kiln::ErrorKind::User,
                          where("outputs", i, t.name) + ": buffer of " + std::to_string(t.bytes) +
                              " bytes, the output needs " + std::to_string(r.data.size()));
      if (!r.data.empty() && t.data == nullptr)
        throw kiln::Error(kiln::ErrorKind::User, where("outputs", i, t.name) + ".data is NULL");
      if (!r.data.empty()) std::memcpy(t.data, r.data.data(), r.data.size());
      t.rank = static_cast<int32_t>(r.shape.size());
      for (size_t k = 0; k < r.shape.size(); ++k) t.shape[k] = r.shape[k];
    }
  });
}

kiln_status kiln_device_alloc(uint64_t bytes, uint64_t* ptr) {
  KILN_C_REQUIRE(ptr);
  *ptr = 0;
  return guarded([&] { *ptr = kiln::cuda::mem_alloc(static_cast<size_t>(bytes)); });
}

void kiln_device_free(uint64_t ptr) {
  try {
    kiln::cuda::mem_free(ptr);
  } catch (...) {
    // never throws across the ABI
  }
}

kiln_status kiln_memcpy_htod(uint64_t dst, const void* src, uint64_t bytes) {
  if (bytes > 0) KILN_C_REQUIRE(src);
  if (bytes > 0 && dst == 0) return fail(KILN_ERROR_ARGUMENT, "dst is 0");
  return guarded([&] { kiln::cuda::memcpy_htod(dst, src, static_cast<size_t>(bytes)); });
}

kiln_status kiln_memcpy_dtoh(void* dst, uint64_t src, uint64_t bytes) {
  if (bytes > 0) KILN_C_REQUIRE(dst);
  if (bytes > 0 && src == 0) return fail(KILN_ERROR_ARGUMENT, "src is 0");
  return guarded([&] {
    kiln::cuda::ctx_synchronize();  // the device copy follows earlier work on any stream
    kiln::cuda::memcpy_dtoh(dst, src, static_cast<size_t>(bytes));
  });
}

kiln_status kiln_stream_synchronize(void* stream) {
  return guarded([&] { kiln::cuda::stream_synchronize(stream); });
}

kiln_status kiln_device_count(int32_t* n) {
  KILN_C_REQUIRE(n);
  *n = 0;
  return guarded([&] {
    if (kiln::cuda::driver_available()) *n = kiln::cuda::device_count();
  });
}

kiln_status kiln_device_alloc_on(int32_t device, uint64_t bytes, uint64_t* ptr) {
  KILN_C_REQUIRE(ptr);
  *ptr = 0;
  return guarded([&] {
    kiln::cuda::ContextScope scope(device_context(device));
    *ptr = kiln::cuda::mem_alloc(static_cast<size_t>(bytes));
  });
}

kiln_status kiln_memcpy_htod_on(int32_t device, uint64_t dst, const void* src, uint64_t bytes) {
  if (bytes > 0) KILN_C_REQUIRE(src);
  if (bytes > 0 && dst == 0) return fail(KILN_ERROR_ARGUMENT, "dst is 0");
  return guarded([&] {
    kiln::cuda::ContextScope scope(device_context(device));
    kiln::cuda::memcpy_htod(dst, src, static_cast<size_t>(bytes));
  });
}

kiln_status kiln_memcpy_dtoh_on(int32_t device, void* dst, uint64_t src, uint64_t bytes) {
  if (bytes > 0) KILN_C_REQUIRE(dst);
  if (bytes > 0 && src == 0) return fail(KILN_ERROR_ARGUMENT, "src is 0");
  return guarded([&] {
    kiln::cuda::ContextScope scope(device_context(device));
    kiln::cuda::ctx_synchronize();  // the device copy follows earlier work on any stream
    kiln::cuda::memcpy_dtoh(dst, src, static_cast<size_t>(bytes));
  });
}

kiln_status kiln_stream_synchronize_on(int32_t device, void* stream) {
  return guarded([&] {
    kiln::cuda::ContextScope scope(device_context(device));
    kiln::cuda::stream_synchronize(stream);
  });
}

kiln_status kiln_device_synchronize(int32_t device) {
  return guarded([&] {
    kiln::cuda::ContextScope scope(device_context(device));
    kiln::cuda::ctx_synchronize();
  });
}

}  // extern "C"
