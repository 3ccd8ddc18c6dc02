// The looped row norm, for symbolic or very long rows: one CTA per row and several passes over
// it, the prologue recomputed in each (the later passes are served from L1/L2).
#include <functional>

#include "codegen/rownorm/rownorm_kernel.hpp"

namespace kiln {

void RowNormKernel::looped() {
  // One pass over the row: `body` gets each element's loader and prologue value.
  auto pass = [&](const std::function<void(ElementLoader&, const std::string&)>& body, bool store) {
    w_.open("for (long long j = tid; j < {}; j += {}) {{", Lr_, T_);
    ElementLoader ld = make_loader("j", {});
    std::string v = emit_prologue(ld, store);
    body(ld, v);
    w_.close();
  };
  w_.open("{{");
  w_.line("float acc = {};", softmax_family_ ? "-KILN_INF" : "0.0f");
  if (A_.op == OpKind::Layernorm) {
    pass([&](ElementLoader&, const std::string& v) { w_.line("acc += {};", v); }, false);
    w_.line("mean = {} / static_cast<float>({});", reduce("sum", "acc"), Lr_);
    w_.line("acc = 0.0f;");
    pass(
        [&](ElementLoader&, const std::string& v) {
          w_.line("const float d = {} - mean;", v);
          w_.line("acc += d * d;");
        },
        false);
    w_.line("rstd = rsqrtf({} / static_cast<float>({}) + {});", reduce("sum", "acc"), Lr_, eps_);
  } else if (A_.op == OpKind::Rmsnorm) {
    pass([&](ElementLoader&, const std::string& v) { w_.line("acc += {0} * {0};", v); }, false);
    w_.line("rstd = rsqrtf({} / static_cast<float>({}) + {});", reduce("sum", "acc"), Lr_, eps_);
  } else {
    pass([&](ElementLoader&, const std::string& v) { w_.line("acc = fmaxf(acc, {});", v); }, false);
    w_.line("row_max = {};", reduce("max", "acc"));
    w_.line("acc = 0.0f;");
    pass([&](ElementLoader&, const std::string& v) { w_.line("acc += expf({} - row_max);", v); },
         false);
    if (log_softmax_)
      w_.line("log_sum = logf({});", reduce("sum", "acc"));
    else
      w_.line("inv_sum = 1.0f / {};", reduce("sum", "acc"));
  }
  w_.close();
  pass(
      [&](ElementLoader& ld, const std::string& v) {
        std::string x = v;
        if (A_.op == OpKind::Softmax) {
          w_.line("const float e = expf({} - row_max);", v);
          x = "e";
        }
        emit_epilogue(ld, anchor_value(ld, x), {}, pro_vals_);
      },
      true);
}

}  // namespace kiln
