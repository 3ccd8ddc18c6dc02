// The split channel norm (sm_80+, dense NHWC, static C and spatial size;
// "..._g32_split_stats_..." and "..._g32_split_apply_..."): two kernels sharing a workspace,
// with no CTA ever waiting for another. Each sample's S x C elements (contiguous) are split into
// B spans of `iters` chunks of threads x vecs 16-byte vectors, one CTA per span in both kernels
// (grid N*B); a thread keeps a chunk's vectors in registers while the next chunk's loads are in
// flight, and threads is a multiple of C / gcd(C, vec) so each lane's channel is fixed. The
// statistics kernel accumulates shifted sums (x - x0), x0 = the group's first element (every CTA
// loads the same, so the sums add up; no cancellation for a large mean), reduces them over the
// CTA in shared memory, and stores its per-group partials; the last CTA of the sample to arrive
// (a self-resetting counter per sample) adds the B partials in chunk order (deterministic) and
// stores the sample's mean and rstd. The apply kernel reads those, re-reads its span (CTAs and
// chunks in reverse order, the statistics kernel having asked L2 to keep the input with
// evict_last), normalizes, applies the affine and the epilogue, and stores with 16-byte vectors.
// DRAM sees the input twice where L2 does not keep it.
#include <functional>

#include "codegen/channelnorm/channelnorm_group.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {
namespace {

// One of the two kernels (`apply` or the statistics).
class SplitKernel {
 public:
  SplitKernel(const ChannelNormGroup& cn, const ChannelNormSplit& l, bool apply)
      : cn_(cn),
        l_(l),
        apply_(apply),
        V_(vec_elems(cn.xd.dtype)),
        B_(l.ctas),
        SV_(cn.C * cn.S.value() / V_),
        chunk_(int64_t{l.threads} * l.vecs),
        parts_(l.ctas * cn.G * 2),
        vin_(cn.register_inputs()),
        gp_(cn.g, cn.grp),
        dp_(gp_.dims) {
    // Lane l of vector i: element e = vi * V + l of the sample, channel e % C (fixed per thread
    // and lane: threads * V is a multiple of C).
    lane_ch_ = cn.C % V_ == 0 ? "(c0 + l)" : fmt::format("((c0 + l) % {})", cn.C);
    lane_pix_ = fmt::format("((vi * {} + l) / {})", V_, cn.C);
    lane_lin_ = fmt::format("(sbase + vi * {} + l)", V_);
    for (int t : vin_) lane_pre_[cn.identity_key(t)] = fmt::format("a{}_1[l]", t);
  }

  KernelSpec emit(const KernelArg& ws, const KernelArg& cnt) {
    gp_.add_trailing("float* __restrict__ kc_ws", ws);
    if (!apply_ && B_ > 1) gp_.add_trailing("unsigned* __restrict__ kc_cnt", cnt);
    preamble();
    if (apply_)
      apply_body();
    else
      statistics_body();
    const int L = l_.iters;
    GroupKernel k = cn_.kernel(
        fmt::format("g{}_split_{}", cn_.G, apply_ ? "apply" : "stats"),
        fmt::format("// split, {}: {} CTAs per sample, each {} chunk{} of {} threads x {} "
                    "vectors, L2 policies\n",
                    apply_ ? "apply" : "statistics", B_, L, L > 1 ? "s" : "", l_.threads, l_.vecs),
        true);
    k.threads = l_.threads;
    k.min_blocks = l_.ctas_per_sm;
    k.grid = cn_.X[0] * Dim(B_);
    KernelSpec spec = group_kernel_spec(k, gp_, w_.str());
    if (!apply_) {  // its own minimum traffic: one read of the register-held inputs
      Dim bytes(0);
      for (int t : vin_)
        bytes = bytes + shape_numel(cn_.X) *
                            Dim(static_cast<int64_t>(dtype_size(cn_.g.tensor(t).desc.dtype)));
      spec.bytes_moved = bytes;
    }
    return spec;
  }

 private:
  // Coordinates of the element at channel `c`, pixel `p` of sample n.
  std::vector<std::string> coords(const std::string& c, const std::string& p) {
    std::vector<std::string> cs(cn_.r, "0");
    cs[0] = "n";
    cs[1] = c;
    auto sc = decompose(p, cn_.spatial, row_major_strides(cn_.spatial), dp_);
    for (size_t k = 0; k < sc.size(); ++k) cs[2 + k] = sc[k];
    return cs;
  }
  // A loader for one lane: the register-held inputs from their unpacked vectors a<t>_1.
  ElementLoader lane_loader() {
    return ElementLoader{cn_.g, cn_.X, cn_.dense_strides, lane_lin_, coords(lane_ch_, lane_pix_),
                         &dp_,  "",    lane_pre_};
  }
  // The prologue for one element; the anchor input's value, every value (the input's included)
  // in `vals`.
  std::string element(ElementLoader& ld, std::map<int, std::string>* vals) {
    std::string v = cn_.element(w_, ld, vals, false);
    (*vals)[cn_.in_t] = v;
    return v;
  }

  // Loops over this thread's vectors, unpacking the register-held inputs; `lane` emits the body
  // of the per-lane loop.
  void over_vectors(const std::function<void()>& before, const std::function<void()>& lane,
                    const std::function<void()>& after) {
    w_.line("#pragma unroll");
    w_.open("for (int i = 0; i < {}; ++i) {{", l_.vecs);
    w_.line("const long long vi = vbase + i * {} + t;", l_.threads);
    if (l_.tail) w_.open("if (vi < {}) {{", SV_);
    for (int t : vin_) {
      w_.line("float a{}_1[{}];", t, V_);
      w_.line("kiln_unpack16(a{}_0[i], {}, a{}_1);", t, tensor_param(t), t);
    }
    before();
    w_.line("#pragma unroll");
    w_.open("for (int l = 0; l < {}; ++l) {{", V_);
    lane();
    w_.close();
    after();
    if (l_.tail) w_.close();
    w_.close();
  }

  // Loads of the chunk at `base` into a<t>_<buf> (all in flight at once).
  void load_chunk(int buf, const std::string& base) {
    w_.line("#pragma unroll");
    w_.open("for (int i = 0; i < {}; ++i) {{", l_.vecs);
    w_.line("const long long vi = {} + i * {} + t;", base, l_.threads);
    for (int t : vin_)
      w_.line("{}a{}_{}[i] = kiln_cn_ld16_hint({} + sbase + vi * {}, pol);",
              l_.tail ? fmt::format("if (vi < {}) ", SV_) : "", t, buf, tensor_param(t), V_);
    w_.close();
  }

  // The span's chunks in order (the apply kernel: last first).
  std::string chunk_base(const std::string& it) const {
    const int L = l_.iters;
    return L == 1 ? std::string("vbase0")
                  : fmt::format("(vbase0 + ({}) * {})",
                                apply_ ? fmt::format("{} - ({})", L - 1, it) : it, chunk_);
  }

  // Each chunk of the span, loaded while the one before it is processed: a<t>_0 holds the
  // current chunk, a<t>_2 the next.
  void over_span(const std::function<void()>& process) {
    const int L = l_.iters;
    if (L == 1) {
      w_.line("const long long vbase = vbase0;");
      process();
      return;
    }
    w_.line("#pragma unroll 1");
    w_.open("for (int it = 0; it < {}; ++it) {{", L);
    w_.line("const long long vbase = {};", chunk_base("it"));
    for (int t : vin_) w_.line("uint4 a{}_2[{}];", t, l_.vecs);
    w_.open("if (it + 1 < {}) {{", L);
    load_chunk(2, chunk_base("it + 1"));
    w_.close();
    process();
    w_.line("#pragma unroll");
    w_.open("for (int i = 0; i < {}; ++i) {{", l_.vecs);
    for (int t : vin_) w_.line("a{0}_0[i] = a{0}_2[i];", t);
    w_.close();
    w_.close();
  }

  void preamble() {
    const int64_t G = cn_.G;
    if (apply_) {
      w_.line("__shared__ float gmean[{0}], grstd[{0}];", G);
      w_.line("// reversed: the chunks the statistics kernel read last are the likeliest in L2");
    }
    w_.line("const long long bid = {};",
            apply_ ? "static_cast<long long>(gridDim.x) - 1 - blockIdx.x" : "blockIdx.x");
    w_.line("const long long n = bid / {};", B_);
    w_.line("const int t = threadIdx.x;");
    w_.line("const long long sbase = n * {};  // first element of the sample",
            cn_.C * cn_.S.value());
    w_.line("const long long vbase0 = (bid % {}) * {};  // this CTA's span", B_, chunk_ * l_.iters);
    w_.line("const int c0 = t * {} % {};  // channel of lane 0", V_, cn_.C);
    w_.line("float* const ws = kc_ws + n * {};  // the sample's partials, then its mean and rstd",
            l_.workspace_floats);
    // 1. Every load of the chunk in flight at once. The statistics kernel asks L2 to keep the
    // input (evict_last) for the apply kernel's re-read, which marks it evict_first again.
    w_.line("const unsigned long long pol = kiln_cn_policy_{}();",
            apply_ ? "evict_first" : "evict_last");
    for (int t : vin_)
      w_.line("uint4 a{}_0[{}];  // as loaded; a<t>_1: unpacked to f32", t, l_.vecs);
    load_chunk(0, chunk_base("0"));
  }

  void statistics_body();
  void group_sums(int64_t n, const std::string& sa, const std::string& sb,
                  const std::function<void()>& done);
  void finish_group(const std::string& a, const std::string& b);
  void apply_body();

  const ChannelNormGroup& cn_;
  const ChannelNormSplit& l_;
  const bool apply_;
  const int V_;
  const int64_t B_, SV_, chunk_, parts_;
  const std::vector<int> vin_;  // the inputs held in registers as raw 16-byte vectors
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  std::string lane_ch_, lane_pix_, lane_lin_;
  std::map<std::string, std::string> lane_pre_;
};

// mean and rstd of group gi from its shifted sums a, b, into the sample's workspace.
void SplitKernel::finish_group(const std::string& a, const std::string& b) {
  const std::string count = fmt::format("{}.0f", cn_.Cg * cn_.S.value());
  w_.line("const float dm = {} / {};", a, count);
  w_.line("ws[{} + 2 * gi] = gshift[gi] + dm;", parts_);
  w_.line("ws[{} + 2 * gi + 1] = rsqrtf(fmaxf({} / {} - dm * dm, 0.0f) + {});", parts_, b, count,
          cuda_float(cn_.A.attr_float("eps")));
}

// Per group gi (a warp each): a and b, the sums over k < n of `sa` and `sb`, then `done` in the
// warp's lane 0.
void SplitKernel::group_sums(int64_t n, const std::string& sa, const std::string& sb,
                             const std::function<void()>& done) {
  const int T = l_.threads, warps = T / 32;
  if (warps * 32 != T) w_.open("if (t < {}) {{", warps * 32);
  w_.open("for (int gi = t / 32; gi < {}; gi += {}) {{", cn_.G, warps);
  w_.line("float a = 0.0f, b = 0.0f;");
  w_.open("for (int k = t % 32; k < {}; k += 32) {{", n);
  w_.line("a += {};", sa);
  w_.line("b += {};", sb);
  w_.close();
  w_.line("a = kiln_warp_sum(a);");
  w_.line("b = kiln_warp_sum(b);");
  w_.open("if (t % 32 == 0) {{");
  done();
  w_.close();
  w_.close();
  if (warps * 32 != T) w_.close();
}

void SplitKernel::statistics_body() {
  const int64_t C = cn_.C, G = cn_.G, Cg = cn_.Cg;
  const int T = l_.threads;
  // 2. The shift of each group: its first element (the same in every CTA of the sample).
  w_.line("__shared__ float red1[{0}], red2[{0}];  // per-lane partials: rows of {1} channels",
          int64_t{T} * V_, C);
  w_.line("__shared__ float gshift[{}];", G);
  w_.open("for (int gi = t; gi < {}; gi += {}) {{", G, T);
  {
    ElementLoader ld{cn_.g,
                     cn_.X,
                     cn_.dense_strides,
                     fmt::format("(sbase + gi * {})", Cg),
                     coords(fmt::format("(gi * {})", Cg), "0"),
                     &dp_,
                     "",
                     {}};
    std::map<int, std::string> vals;
    w_.line("gshift[gi] = {};", element(ld, &vals));
  }
  w_.close();
  w_.line("__syncthreads();");
  w_.line("float shift[{0}], s1[{0}], s2[{0}];", V_);
  w_.line("#pragma unroll");
  w_.open("for (int l = 0; l < {}; ++l) {{", V_);
  w_.line("shift[l] = gshift[{} / {}];", lane_ch_, Cg);
  w_.line("s1[l] = 0.0f;");
  w_.line("s2[l] = 0.0f;");
  w_.close();
  // 3. Shifted sums per lane, then over the CTA: rows of C channels halved in a tree, then per
  // group over its Cg channels (a warp per group).
  std::map<int, std::string> vals;
  over_span([&] {
    over_vectors([] {},
                 [&] {
                   ElementLoader ld = lane_loader();
                   w_.line("const float d = {} - shift[l];", element(ld, &vals));
                   w_.line("s1[l] += d;");
                   w_.line("s2[l] = fmaf(d, d, s2[l]);");
                 },
                 [] {});
  });
  w_.line("#pragma unroll");
  w_.open("for (int l = 0; l < {}; ++l) {{", V_);
  w_.line("red1[t * {0} + l] = s1[l];", V_);
  w_.line("red2[t * {0} + l] = s2[l];", V_);
  w_.close();
  w_.line("__syncthreads();");
  for (int64_t rows = int64_t{T} * V_ / C; rows > 1;) {
    const int64_t h = rows / 2, from = (rows - h) * C;
    w_.open("for (int k = t; k < {}; k += {}) {{", h * C, T);
    w_.line("red1[k] += red1[k + {}];", from);
    w_.line("red2[k] += red2[k + {}];", from);
    w_.close();
    w_.line("__syncthreads();");
    rows -= h;
  }
  group_sums(Cg, fmt::format("red1[gi * {} + k]", Cg), fmt::format("red2[gi * {} + k]", Cg), [&] {
    if (B_ == 1) {
      finish_group("a", "b");
      return;
    }
    w_.line("ws[(bid % {}) * {} + 2 * gi] = a;", B_, 2 * G);
    w_.line("ws[(bid % {}) * {} + 2 * gi + 1] = b;", B_, 2 * G);
    w_.line("__threadfence();  // the partials before this CTA's arrival");
  });
  if (B_ > 1) {
    // 4. The sample's last CTA to arrive adds the B partials of each group in chunk order
    // (deterministic), writes mean and rstd, and zeroes its counter for the next launch.
    w_.line("__shared__ unsigned last;");
    w_.line("__syncthreads();");
    w_.line("if (t == 0) last = atomicAdd(kc_cnt + n, 1u) == {}u;", B_ - 1);
    w_.line("__syncthreads();");
    w_.line("if (!last) return;");
    w_.line("__threadfence();");
    group_sums(B_, fmt::format("kiln_cn_ld_relaxed(ws + k * {} + 2 * gi)", 2 * G),
               fmt::format("kiln_cn_ld_relaxed(ws + k * {} + 2 * gi + 1)", 2 * G),
               [&] { finish_group("a", "b"); });
    w_.line("if (t == 0) kc_cnt[n] = 0u;");
  }
}

// Apply: the sample's statistics (written by the statistics kernel), then per lane the affine
// y = (x - mean) * a + b, a = rstd * scale; normalize, epilogue, store.
void SplitKernel::apply_body() {
  const int64_t G = cn_.G;
  w_.open("for (int gi = t; gi < {}; gi += {}) {{", G, l_.threads);
  w_.line("gmean[gi] = ws[{} + 2 * gi];", parts_);
  w_.line("grstd[gi] = ws[{} + 2 * gi + 1];", parts_);
  w_.close();
  w_.line("__syncthreads();");
  w_.line("float mean[{0}], ka[{0}], kb[{0}];", V_);
  w_.line("#pragma unroll");
  w_.open("for (int l = 0; l < {}; ++l) {{", V_);
  {
    std::vector<std::string> c = coords(lane_ch_, "0");
    w_.line("const int gi = {} / {};", lane_ch_, cn_.Cg);
    w_.line("mean[l] = gmean[gi];");
    w_.line("ka[l] = {};",
            cn_.A.inputs.size() > 1 ? "grstd[gi] * " + cn_.channel_param(1, c, dp_) : "grstd[gi]");
    w_.line("kb[l] = {};",
            cn_.A.inputs.size() > 2 ? cn_.channel_param(2, c, dp_) : std::string("0.0f"));
  }
  w_.close();
  std::vector<int> vout;
  for (int t : cn_.grp.outputs) {
    const TensorDesc& d = cn_.g.tensor(t).desc;
    if (d.shape == cn_.X && tensor_strides(d) == cn_.dense_strides && vec_elems(d.dtype) == V_)
      vout.push_back(t);
  }
  std::map<int, std::string> vals;
  over_span([&] {
    over_vectors(
        [&] {
          for (int t : vout) w_.line("float o{}[{}];", t, V_);
        },
        [&] {
          ElementLoader ld = lane_loader();
          w_.line("const float y = ({} - mean[l]) * ka[l] + kb[l];", element(ld, &vals));
          std::map<int, std::string> seed = vals;
          seed[cn_.out_t] = "y";
          cn_.outputs(w_, ld, seed, vout, false);
        },
        [&] {
          for (int t : vout)
            w_.line("kiln_cn_stv_hint({} + sbase + vi * {}, o{}, pol);", tensor_param(t), V_, t);
        });
  });
}

}  // namespace

std::vector<KernelSpec> emit_channelnorm_split(const ChannelNormGroup& cn,
                                               const ChannelNormSplit& l) {
  KernelArg ws;
  ws.kind = KernelArg::Kind::Scratch;
  ws.value = cn.X[0] * Dim(l.workspace_floats * 4);
  KernelArg cnt;  // per sample: CTAs of the statistics kernel that have arrived
  cnt.kind = KernelArg::Kind::Counters;
  cnt.value = cn.X[0];
  return {SplitKernel(cn, l, false).emit(ws, cnt), SplitKernel(cn, l, true).emit(ws, cnt)};
}

}  // namespace kiln
