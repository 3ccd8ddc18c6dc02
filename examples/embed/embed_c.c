/* Embedding kiln through its C ABI (kiln/kiln.h).
 *
 *   embed_c GRAPH.json NAME=D0,D1,... [NAME=...]
 *
 * Loads the graph, creates an engine, compiles, queries the workspace size and output shapes, and
 * runs on device buffers when a GPU is there; otherwise it compiles with load_kernels=0 and runs
 * the CPU reference (kiln_run_host). Inputs are deterministic values; every output is printed as
 * "OUTPUT name shape [..] sum S abs A first v0 v1 v2 v3". Every status is checked.
 *
 * The device path passes row-major buffers: use it with graphs whose inputs and outputs declare
 * the default (NCHW, row-major) layout. */
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 16

#define CHECK(call)                                                                               \
  do {                                                                                            \
    kiln_status s_ = (call);                                                                      \
    if (s_ != KILN_OK) {                                                                          \
      fprintf(stderr, "embed_c: %s failed (status %d): %s\n", #call, (int)s_, kiln_last_error()); \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

/* f32 <-> f16/bf16 (round to nearest even), enough for an example. */
static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t m = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    m |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return (uint16_t)(sign | h);
}
static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, x;
  if (e == 0) {
    float v = ldexpf((float)m, -24);
    return sign ? -v : v;
  }
  if (e == 31)
    x = sign | 0x7f800000u | (m << 13);
  else
    x = sign | ((e - 15 + 127) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}
static float bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static size_t dtype_size(kiln_dtype t) {
  return t == KILN_F32 ? 4 : 2;
}
static void store(kiln_dtype t, void* p, size_t i, float v) {
  if (t == KILN_F32)
    ((float*)p)[i] = v;
  else if (t == KILN_F16)
    ((uint16_t*)p)[i] = f32_to_f16(v);
  else
    ((uint16_t*)p)[i] = f32_to_bf16(v);
}
static float load(kiln_dtype t, const void* p, size_t i) {
  if (t == KILN_F32) return ((const float*)p)[i];
  if (t == KILN_F16) return f16_to_f32(((const uint16_t*)p)[i]);
  return bf16_to_f32(((const uint16_t*)p)[i]);
}
/* The example's input values (tests/test_embed_install.cpp computes the same ones). */
static float input_value(int which, size_t i) {
  return (float)((int)((i * 7 + (size_t)which * 3) % 17) - 8) / 8.0f;
}

static size_t numel(int32_t rank, const int64_t* shape) {
  size_t n = 1;
  for (int32_t k = 0; k < rank; ++k) n *= (size_t)shape[k];
  return n;
}

static void print_output(const char* name, kiln_dtype dt, const void* data, int32_t rank,
                         const int64_t* shape) {
  size_t n = numel(rank, shape);
  double sum = 0, abs_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    double v = load(dt, data, i);
    sum += v;
    abs_sum += fabs(v);
  }
  printf("OUTPUT %s shape [", name);
  for (int32_t k = 0; k < rank; ++k) printf("%s%lld", k ? "," : "", (long long)shape[k]);
  printf("] sum %.6f abs %.6f first", sum, abs_sum);
  for (size_t i = 0; i < n && i < 4; ++i) printf(" %.5f", load(dt, data, i));
  printf("\n");
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: embed_c GRAPH.json NAME=D0,D1,... [NAME=...]\n");
    return 2;
  }
  printf("kiln %s\n", kiln_version());
  kiln_graph g = NULL;
  CHECK(kiln_graph_load_file(argv[1], &g));

  /* Inputs: NAME=D0,D1,... from the command line, in the declared dtype. */
  int32_t n_in = 0;
  CHECK(kiln_graph_num_inputs(g, &n_in));
  if (n_in != argc - 2 || n_in > MAX_TENSORS) {
    fprintf(stderr, "embed_c: the graph has %d inputs, %d shapes given\n", n_in, argc - 2);
    return 2;
  }
  kiln_host_tensor hin[MAX_TENSORS];
  kiln_tensor din[MAX_TENSORS];
  kiln_dtype in_dt[MAX_TENSORS];
  memset(hin, 0, sizeof(hin));
  memset(din, 0, sizeof(din));
  for (int i = 0; i < n_in; ++i) {
    char* arg = argv[2 + i];
    char* eq = strchr(arg, '=');
    if (!eq) {
      fprintf(stderr, "embed_c: expected NAME=D0,D1,..., found '%s'\n", arg);
      return 2;
    }
    *eq = '\0';
    hin[i].name = arg;
    for (char* p = eq + 1; *p && hin[i].rank < KILN_MAX_RANK;) {
      hin[i].shape[hin[i].rank++] = strtoll(p, &p, 10);
      if (*p == ',') ++p;
    }
    CHECK(kiln_graph_tensor_dtype(g, arg, &in_dt[i]));
    size_t n = numel(hin[i].rank, hin[i].shape);
    hin[i].bytes = n * dtype_size(in_dt[i]);
    hin[i].data = malloc(hin[i].bytes ? hin[i].bytes : 1);
    for (size_t k = 0; k < n; ++k) store(in_dt[i], hin[i].data, k, input_value(i, k));
    din[i].name = arg;
    din[i].rank = hin[i].rank;
    memcpy(din[i].shape, hin[i].shape, sizeof(din[i].shape));
  }

  /* An engine for the device when there is one, else compile-only. */
  kiln_engine_options opts;
  kiln_engine_options_default(&opts);
  kiln_engine e = NULL;
  CHECK(kiln_engine_create(&opts, &e));
  int gpu = kiln_engine_has_device(e);
  if (!gpu) {
    kiln_engine_destroy(e);
    opts.load_kernels = 0;
    CHECK(kiln_engine_create(&opts, &e));
  }
  kiln_compiled c = NULL;
  CHECK(kiln_compile(e, g, &c));
  kiln_stats st;
  CHECK(kiln_engine_stats(e, &st));
  printf("compiled: %lld nvrtc, %lld disk, %lld memory\n", (long long)st.nvrtc_compiles,
         (long long)st.disk_cache_hits, (long long)st.memory_cache_hits);
  uint64_t ws_bytes = 0;
  CHECK(kiln_workspace_size(c, din, n_in, NULL, NULL, 0, &ws_bytes));
  printf("workspace: %llu bytes\n", (unsigned long long)ws_bytes);

  int32_t n_out = 0;
  CHECK(kiln_graph_num_outputs(g, &n_out));
  if (n_out > MAX_TENSORS) return 2;
  kiln_host_tensor hout[MAX_TENSORS];
  kiln_tensor dout[MAX_TENSORS];
  kiln_dtype out_dt[MAX_TENSORS];
  memset(hout, 0, sizeof(hout));
  memset(dout, 0, sizeof(dout));
  for (int i = 0; i < n_out; ++i) {
    const char* name = NULL;
    CHECK(kiln_graph_output_name(g, i, &name));
    CHECK(kiln_graph_tensor_dtype(g, name, &out_dt[i]));
    dout[i].name = name;
    CHECK(kiln_output_shape(c, din, n_in, NULL, NULL, 0, name, &dout[i].rank, dout[i].shape));
    hout[i].name = name;
    hout[i].bytes = numel(dout[i].rank, dout[i].shape) * dtype_size(out_dt[i]);
    hout[i].data = malloc(hout[i].bytes ? hout[i].bytes : 1);
  }

  if (gpu) {
    printf("path: gpu\n");
    for (int i = 0; i < n_in; ++i) {
      CHECK(kiln_device_alloc(hin[i].bytes ? hin[i].bytes : 1, &din[i].ptr));
      CHECK(kiln_memcpy_htod(din[i].ptr, hin[i].data, hin[i].bytes));
    }
    for (int i = 0; i < n_out; ++i)
      CHECK(kiln_device_alloc(hout[i].bytes ? hout[i].bytes : 1, &dout[i].ptr));
    uint64_t ws = 0;
    if (ws_bytes) CHECK(kiln_device_alloc(ws_bytes, &ws));
    CHECK(kiln_stream_synchronize(NULL));
    CHECK(kiln_run(c, din, n_in, dout, n_out, NULL, ws));
    CHECK(kiln_stream_synchronize(NULL));
    for (int i = 0; i < n_out; ++i) {
      CHECK(kiln_memcpy_dtoh(hout[i].data, dout[i].ptr, hout[i].bytes));
      print_output(dout[i].name, out_dt[i], hout[i].data, dout[i].rank, dout[i].shape);
      kiln_device_free(dout[i].ptr);
    }
    for (int i = 0; i < n_in; ++i) kiln_device_free(din[i].ptr);
    kiln_device_free(ws);
  } else {
    printf("path: cpu reference (no GPU: compiled with load_kernels=0)\n");
    CHECK(kiln_run_host(g, hin, n_in, hout, n_out));
    for (int i = 0; i < n_out; ++i)
      print_output(hout[i].name, out_dt[i], hout[i].data, hout[i].rank, hout[i].shape);
  }

  for (int i = 0; i < n_in; ++i) free(hin[i].data);
  for (int i = 0; i < n_out; ++i) free(hout[i].data);
  kiln_compiled_destroy(c);
  kiln_engine_destroy(e);
  kiln_graph_destroy(g);
  return 0;
}
