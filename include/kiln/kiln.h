/* kiln C ABI: a stable C interface over the C++ Engine for inference runtimes.
 *
 * Handles are opaque; every function returns a kiln_status and never throws or aborts across the
 * boundary. On failure, kiln_last_error() returns the message of the last failed call on this
 * thread.
 *
 * Thread safety: a kiln_engine may be used by several threads at once (compiles share the kernel
 * cache). A kiln_compiled is immutable: kiln_run() may be called concurrently from several threads
 * provided each call passes its own stream and its own workspace (a caller workspace of
 * kiln_workspace_size() bytes). With workspace 0 the compiled graph's internal arena is used, which
 * is NOT safe for concurrent runs. A kiln_graph must not be modified while compiled.
 * kiln_run_host() may run concurrently on one graph. kiln_last_error() is per thread.
 *
 * Devices: an engine runs on one device (kiln_engine_options.device) or in the caller's context
 * (use_current_context). Every call runs the driver in the context it concerns and leaves the
 * calling thread's current CUDA context (and context stack) exactly as it found it. Engines on
 * several devices may be used concurrently, each from its own threads; a stream passed to
 * kiln_run() must belong to the engine's context. See docs/EMBEDDING.md.
 */
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_MAX_RANK 8

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_USER = 1,     /* bad graph, bad input, unsupported combination */
  KILN_ERROR_INTERNAL = 2, /* a kiln bug */
  KILN_ERROR_DRIVER = 3,   /* CUDA driver or NVRTC failure */
  KILN_ERROR_ARGUMENT = 4  /* a NULL handle or pointer, an index out of range */
} kiln_status;

typedef struct kiln_graph_t* kiln_graph;
typedef struct kiln_engine_t* kiln_engine;
typedef struct kiln_compiled_t* kiln_compiled;

/* A tensor of the caller: name (a graph input or output), device pointer, logical shape. Its memory
 * layout is the one the graph declares for that tensor. */
typedef struct kiln_tensor {
  const char* name;
  uint64_t ptr; /* CUdeviceptr */
  int32_t rank;
  int64_t shape[KILN_MAX_RANK];
} kiln_tensor;

/* Fill with kiln_engine_options_default() first. Fields are only ever appended, and the library
 * reads no byte past the struct the caller was built with: see kiln_engine_options_init below. */
typedef struct kiln_engine_options {
  const char* arch;         /* "sm_90"...; NULL or "" = the device's own */
  int32_t fusion;           /* 1 (default) or 0 */
  int32_t disk_cache;       /* 1 (default) or 0 */
  const char* cache_dir;    /* NULL = default location */
  int32_t load_kernels;     /* 1 (default); 0 = compile to cubin only (no GPU needed) */
  int32_t cuda_graphs;      /* 0 (default); 1 = replay a CUDA graph per (shapes, buffers) */
  int32_t specialize_after; /* 0 (default, off); K = shape-specialized kernels after K runs */
  int32_t autotune;         /* 0 (default); 1 = time conv/matmul candidates, keep the fastest */
  const char* tuning_file;  /* NULL = <cache dir>/tuning.json */
  /* Added after 0.1.0 (a larger struct: kiln_engine_options_init). */
  int32_t device; /* CUDA device ordinal (after CUDA_VISIBLE_DEVICES), 0 (default), 1, ... */
  /* 0 (default); 1 = run in the CUDA context current on the thread calling kiln_engine_create
   * (not retained: keep it alive while the engine lives); device must then be 0 or its device */
  int32_t use_current_context;
  /* 0 (default); 1 = a run does not wait to check its gathers' indices: an error is returned by
   * a later kiln_run or by kiln_check_errors (EngineOptions::deferred_errors) */
  int32_t deferred_errors;
} kiln_engine_options;

/* Element types. KILN_BOOL is one byte holding 0 or 1 (any nonzero byte reads as true). */
typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_F16 = 1,
  KILN_BF16 = 2,
  KILN_I32 = 3,
  KILN_I64 = 4,
  KILN_BOOL = 5
} kiln_dtype;

/* A tensor in host memory for kiln_run_host: logical row-major data in the dtype the graph
 * declares for it (whatever layout the graph declares for the device). `bytes` is the size of the
 * buffer at `data`. For inputs, `rank`/`shape` give the shape; for outputs they are filled in. */
typedef struct kiln_host_tensor {
  const char* name;
  void* data;
  uint64_t bytes;
  int32_t rank;
  int64_t shape[KILN_MAX_RANK];
} kiln_host_tensor;

typedef struct kiln_stats {
  int64_t plans;
  int64_t nvrtc_compiles;
  int64_t memory_cache_hits;
  int64_t disk_cache_hits;
  int64_t graph_cache_hits;
  int64_t specializations;
  int64_t autotune_measured; /* conv/matmul shape classes timed by autotuning */
  int64_t autotune_reused;   /* ... found in the tuning file */
} kiln_stats;

const char* kiln_version(void);
/* The message of the last failed call on this thread ("" when none). Valid until the next call. */
const char* kiln_last_error(void);
/* Options versioning: these take the size of the caller's struct, fill / read only the fields
 * within it, and give every field past it its default. The macros below make the familiar names
 * pass sizeof(kiln_engine_options) of the header a program is built with; a program built against
 * an older header calls the functions of those names, which see the struct as it was before
 * `device` (fields up to tuning_file). */
void kiln_engine_options_init(kiln_engine_options* opts, size_t size);

kiln_status kiln_graph_load_file(const char* path, kiln_graph* out);
kiln_status kiln_graph_load_string(const char* json, const char* base_dir, kiln_graph* out);
void kiln_graph_destroy(kiln_graph g);
kiln_status kiln_graph_num_inputs(kiln_graph g, int32_t* n);
kiln_status kiln_graph_num_outputs(kiln_graph g, int32_t* n);
/* The name of input/output i; the string lives as long as the graph. */
kiln_status kiln_graph_input_name(kiln_graph g, int32_t i, const char** name);
kiln_status kiln_graph_output_name(kiln_graph g, int32_t i, const char** name);

kiln_status kiln_engine_create_sized(const kiln_engine_options* opts, size_t size,
                                     kiln_engine* out);
void(kiln_engine_options_default)(kiln_engine_options* opts);
kiln_status(kiln_engine_create)(const kiln_engine_options* opts, kiln_engine* out);
#define kiln_engine_options_default(opts) \
  kiln_engine_options_init((opts), sizeof(kiln_engine_options))
#define kiln_engine_create(opts, out) \
  kiln_engine_create_sized((opts), sizeof(kiln_engine_options), (out))
void kiln_engine_destroy(kiln_engine e);
kiln_status kiln_engine_stats(kiln_engine e, kiln_stats* out);
/* 1 when kernels can run on a device here, else 0. */
int32_t kiln_engine_has_device(kiln_engine e);
/* The device ordinal the engine runs on (its context's device with use_current_context). */
kiln_status kiln_engine_device(kiln_engine e, int32_t* device);

kiln_status kiln_compile(kiln_engine e, kiln_graph g, kiln_compiled* out);
void kiln_compiled_destroy(kiln_compiled c);

/* Symbol binding: symbols are bound from the shapes of `inputs` (ptr may be 0 here) plus `symbols`
 * (names) = `values` (n_symbols of them, for symbols no input carries). */
kiln_status kiln_output_shape(kiln_compiled c, const kiln_tensor* inputs, int32_t n_inputs,
                              const char* const* symbols, const int64_t* values, int32_t n_symbols,
                              const char* output, int32_t* rank, int64_t* shape);
kiln_status kiln_workspace_size(kiln_compiled c, const kiln_tensor* inputs, int32_t n_inputs,
                                const char* const* symbols, const int64_t* values,
                                int32_t n_symbols, uint64_t* bytes);

/* Runs on `stream` (a CUstream, NULL = legacy default stream). `workspace` is a device buffer of at
 * least kiln_workspace_size() bytes, or 0 for the internal arena. A graph with a gather waits for
 * the stream and returns KILN_ERROR_USER (naming the node) when an index was out of range; so does
 * one with an attention_varlen when its sequence offsets were invalid. */
kiln_status kiln_run(kiln_compiled c, const kiln_tensor* inputs, int32_t n_inputs,
                     const kiln_tensor* outputs, int32_t n_outputs, void* stream,
                     uint64_t workspace);

/* With deferred_errors: waits for the error words of the runs so far; KILN_ERROR_USER naming the
 * node when an index was out of range. KILN_OK otherwise. */
kiln_status kiln_check_errors(kiln_compiled c);

/* The declared dtype of a graph tensor (an input, output or any named tensor). */
kiln_status kiln_graph_tensor_dtype(kiln_graph g, const char* name, kiln_dtype* dtype);

/* Runs the graph on the CPU reference (f64 math, every stored tensor rounded to its dtype): no GPU
 * needed. Symbols are bound from the input shapes. Every graph input must be given; `outputs`
 * names any of the graph's outputs (each buffer at least as large as the output). Thread-safe for
 * distinct output buffers. */
kiln_status kiln_run_host(kiln_graph g, const kiln_host_tensor* inputs, int32_t n_inputs,
                          kiln_host_tensor* outputs, int32_t n_outputs);

/* Device memory helpers, so that a C program needs no CUDA headers: a buffer from
 * kiln_device_alloc is 256-byte aligned. Copies are synchronous. The *_on forms take the device:
 * an ordinal (its primary context) or KILN_DEVICE_CURRENT_CONTEXT (the context current on the
 * calling thread); the plain forms are device 0. A device that does not exist is
 * KILN_ERROR_USER, its message listing the devices. */
#define KILN_DEVICE_CURRENT_CONTEXT (-1)
/* CUDA devices visible to this process (0, and KILN_OK, without a driver). */
kiln_status kiln_device_count(int32_t* n);
kiln_status kiln_device_alloc(uint64_t bytes, uint64_t* ptr);
kiln_status kiln_device_alloc_on(int32_t device, uint64_t bytes, uint64_t* ptr);
/* Frees on the device the buffer belongs to. */
void kiln_device_free(uint64_t ptr);
kiln_status kiln_memcpy_htod(uint64_t dst, const void* src, uint64_t bytes);
kiln_status kiln_memcpy_htod_on(int32_t device, uint64_t dst, const void* src, uint64_t bytes);
/* Waits for the device's work on every stream first. */
kiln_status kiln_memcpy_dtoh(void* dst, uint64_t src, uint64_t bytes);
kiln_status kiln_memcpy_dtoh_on(int32_t device, void* dst, uint64_t src, uint64_t bytes);
/* Waits for all work on `stream` (NULL = the legacy default stream of the device's context). */
kiln_status kiln_stream_synchronize(void* stream);
kiln_status kiln_stream_synchronize_on(int32_t device, void* stream);
/* Waits for all work on the device (its context). */
kiln_status kiln_device_synchronize(int32_t device);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H_ */
