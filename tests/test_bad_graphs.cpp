// Every file in tests/bad_graphs/*.json is refused with a located user error. The table pins, per
// file, the place and the phrase its message must contain; a file without a row fails the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "tests/test_paths.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(kiln::testing::source_dir()) / "tests" / "bad_graphs";

// file -> substrings its message must contain (the file name itself is always checked).
const std::map<std::string, std::vector<std::string>>& expectations() {
  static const std::map<std::string, std::vector<std::string>> t = {
      {"malformed_json.json", {"malformed_json.json:4:9: invalid JSON", "expected '}'"}},
      {"truncated.json", {"truncated.json:1:", "invalid JSON", "unexpected end of input"}},
      {"duplicate_key.json", {"duplicate key 'outputs'"}},
      {"not_an_object.json", {"expected a JSON object at the top level, found array"}},
      {"unknown_version.json", {"kiln: unsupported format version 2", "reads version 1"}},
      {"missing_version.json", {"missing \"kiln\": 1"}},
      {"unknown_top_key.json", {"unknown key 'node'", "valid: kiln, name, doc, metadata"}},
      {"unknown_tensor_key.json",
       {"inputs.x: unknown key 'dype'", "valid: dtype, shape, layout, strides"}},
      {"unknown_dtype.json",
       {"inputs.x.dtype: expected f32, f16, bf16, i32, i64 or bool, found 'f64'"}},
      {"zero_dim.json", {"inputs.x.shape[1]: expected a positive integer", "found 0"}},
      {"bad_symbol.json", {"inputs.x.shape[0]:", "cannot read dim '2N'", "symbol name"}},
      {"nhwc_3d.json", {"inputs.x.layout: NHWC needs a 4-D tensor, found rank 3"}},
      {"layout_and_strides.json", {"inputs.x: give either 'layout' or 'strides', not both"}},
      {"unknown_init_key.json",
       {"constants.w.init: unknown key 'gaussian'", "valid: normal, uniform, seed"}},
      {"two_data_sources.json",
       {"constants.w: expected exactly one of 'data', 'file' or 'init', found 2"}},
      {"inline_count.json", {"constants.b.data: expected 16 values for shape [16], found 3"}},
      {"inline_not_number.json", {"constants.b.data[1]: expected a number, found string"}},
      {"symbolic_constant.json", {"constants.c.shape: constants need a static shape"}},
      {"huge_constant.json", {"constants.big.shape:", "over the limit"}},
      {"missing_weight_file.json",
       {"constants.w.file:", "no_such_weights.safetensors: cannot open safetensors file"}},
      {"short_weight_file.json",
       {"constants.w.file:", "short.safetensors", "runs past the end of the data"}},
      {"safetensors_key_missing.json",
       {"constants.w.key: no tensor 'conv1.weight'", "the file has: w, w16"}},
      {"safetensors_shape_mismatch.json",
       {"constants.w.shape: the constant is declared [4, 8, 3, 3]", "has shape [4, 2, 3, 3]"}},
      {"safetensors_dtype_mismatch.json",
       {"constants.w.dtype: the constant is declared f32 but tensor 'w16'", "is F16"}},
      {"safetensors_overlap.json", {"constants.w.file:", "'a'", "'b'", "overlap"}},
      {"safetensors_f64.json", {"constants.w:", "has dtype F64, which kiln does not read"}},
      {"safetensors_bad_header.json",
       {"constants.w.file:", "bad_header.safetensors", "invalid JSON"}},
      {"unknown_op.json", {"nodes[0] (c).op: unknown op 'convolution'", "known ops: relu"}},
      {"unknown_attribute.json",
       {"nodes[0] (conv1): unknown attribute 'strides' for op conv2d",
        "valid: stride, padding, dilation, groups"}},
      {"missing_required_attr.json",
       {"nodes[0] (gn): missing required attribute 'groups' of op groupnorm"}},
      {"bad_enum.json", {"nodes[0] (g1).approximate: expected one of none|tanh"}},
      {"attr_object.json", {"nodes[0] (lr).alpha: expected a number", "found object"}},
      {"float_in_int_list.json",
       {"nodes[0] (pool).kernel[1]: expected an integer, found number 2.5"}},
      {"wrong_arity.json", {"nodes[0] (add1).inputs: op add takes 2 inputs, found 1"}},
      {"node_without_outputs.json", {"nodes[0] (r).outputs: expected 1 output name, found none"}},
      {"negative_stride.json", {"nodes[0] (conv1).stride: expected integers >= 1, found -1"}},
      {"groups_not_dividing.json",
       {"nodes[0] (conv1).groups: groups 3 does not divide the 8 input channels"}},
      {"dtype_mismatch.json",
       {"nodes[0] (conv1): dtype mismatch: input 1 ('w') is f16 but input 0 ('x') is f32"}},
      {"broadcast_failure.json", {"nodes[0] (mul1):", "do not broadcast"}},
      {"matmul_inner_mismatch.json", {"nodes[0] (mm): inner dims differ", "K=64", "K=32"}},
      {"reshape_mismatch.json", {"nodes[0] (rs).shape: cannot reshape"}},
      {"axis_out_of_range.json", {"nodes[0] (sm).axis: axis 4 out of range for rank 4"}},
      {"window_too_large.json", {"nodes[0] (pool):", "does not fit input height 16"}},
      {"undefined_tensor.json", {"nodes[1] (add1).inputs[1]: tensor 'foo' is not defined"}},
      {"defined_twice.json",
       {"nodes[1] (b).outputs[0]: tensor 'y' is defined twice (also by nodes[0] (a))"}},
      {"output_shadows_input.json",
       {"nodes[0] (r).outputs[0]: tensor 'x' is already defined as an input"}},
      {"cycle.json",
       {"nodes: the nodes form a cycle",
        "nodes[0] (a) -> nodes[1] (b) -> nodes[2] (c) -> "
        "nodes[0] (a)"}},
      {"output_not_defined.json", {"outputs[1]: tensor 'z' is not defined"}},
      {"output_listed_twice.json", {"outputs[1]: tensor 'y' is listed twice"}},
      {"reshape_huge.json", {"nodes[0] (r).shape: more than", "elements (the limit)"}},
      {"broadcast_huge.json",
       {"nodes[1] (abc).outputs[0] ([16777216, 16777216, 16777216]): more than"}},
      {"empty_outputs.json", {"outputs: expected at least one output, found an empty list"}},
      {"pad_wrong_count.json",
       {"nodes[0] (p).pads: expected 2 x rank = 8 integers", "for input 'x' [N, 3, 16, 16]",
        "found 2 values"}},
      {"pad_negative.json",
       {"nodes[0] (crop).pads[3]: expected an integer in 0..2147483647 (pad never crops), found "
        "-1"}},
      // Integer and bool tensors (docs/graph_format.md, "Integer and bool tensors").
      {"relu_int_input.json",
       {"nodes[0] (r).inputs[0]: relu takes a floating tensor, got i64 'ids'"}},
      {"where_float_cond.json",
       {"nodes[0] (w).inputs[0]: where takes a bool condition, got f32 'c'"}},
      {"where_value_mismatch.json",
       {"nodes[0] (w).inputs[2]: where's values must have one dtype: 'z' is f16 but 'x' is f32"}},
      {"add_int_float.json",
       {"nodes[0] (a).inputs[1]: add mixes integer and floating operands: 'x' is f32 but 'ids' "
        "is i64 (insert a cast)"}},
      {"matmul_int.json", {"nodes[0] (mm).inputs[0]: matmul takes a floating tensor, got i32 'a'"}},
      {"logical_float.json", {"nodes[0] (l).inputs[0]: and takes a bool tensor, got f32 'x'"}},
      {"order_bool.json",
       {"nodes[0] (cmp).inputs[0]: lt takes a numeric tensor (floating or integer, not bool), got "
        "bool 'm'"}},
      {"reduce_bool.json",
       {"nodes[0] (count).inputs[0]: reduce_sum takes a floating tensor, got bool 'm'"}},
      {"int_data_out_of_range.json", {"constants.c.data[1]: 30000000000 is out of range for i32"}},
      {"int_data_fraction.json",
       {"constants.c.data[1]: expected an integer (i64 data), found number 1.5"}},
      {"cast_unknown_dtype.json",
       {"nodes[0] (c).dtype: expected one of f32|f16|bf16|i32|i64|bool"}},
      {"concat_shape_mismatch.json",
       {"nodes[0] (dense_cat): input 1 ('b') has shape [N, 32, 14, 14] but input 0 ('a') has "
        "[N, 64, 28, 28]: dim 2 differs (14 vs 28; only the concat axis 1 may)"}},
      {"slice_axis_out_of_range.json", {"nodes[0] (crop).axes[0]: axis 2 out of range for rank 2"}},
      {"gather_float_indices.json",
       {"nodes[0] (embed).inputs[1]: gather takes i32 or i64 indices, got f32 'ids'"}},
      {"gather_elements_rank.json",
       {"nodes[0] (pick).inputs[1]: the indices 'idx' [N, 16] must have the rank of the data 'x' "
        "[N, 6, 16] (3)"}},
      {"gather_axis_out_of_range.json",
       {"nodes[0] (cols).axis: axis -3 out of range for 'x' of rank 2"}},
      {"split_sizes_sum.json",
       {"nodes[0] (qkv).split: the sizes [4, 4, 5] sum to 13, not to the split axis's 12"}},
      {"depth_to_space_channels.json",
       {"nodes[0] (shuffle).blocksize: the 6 channels of 'x' are not divisible by blocksize^2 = "
        "4"}},
      {"prelu_slope_no_broadcast.json",
       {"nodes[0] (act): slope 'slope' [4] does not broadcast to input 'x' [N, 4, 5, 5]",
        "[C, 1, 1]"}},
      {"log_softmax_axis_out_of_range.json",
       {"nodes[0] (lsm).axis: axis -3 out of range for rank 2"}},
      {"cumsum_bad_exclusive.json", {"nodes[0] (cs).exclusive: expected 0 or 1, found 2"}},
      {"resize_cubic.json", {"nodes[0] (up).mode: unsupported resize mode 'cubic'"}},
      {"resize_channels.json",
       {"nodes[0] (up).sizes[1]: resizing the channel dim is not supported (3 to 6"}},
      {"resize_coordinate_mode.json",
       {"nodes[0] (crop).coordinate_transformation_mode: unsupported coordinate transformation "
        "mode 'tf_crop_and_resize'"}},
      {"conv_transpose_channels.json",
       {"nodes[0] (up):", "filter 'w' [6, 4, 3, 3] has 6 input channels", "'x' has 8 channels"}},
      {"conv_transpose_output_padding.json",
       {"nodes[0] (up).output_padding: 2 (axis 1) must be smaller than the stride 2"}},
      {"argmax_axis_out_of_range.json", {"nodes[0] (am).axis: axis 2 out of range for rank 2"}},
      {"range_bad_length.json", {"nodes[0] (pos).length: expected one size", "found 2 values"}},
      {"range_fractional_int.json",
       {"nodes[0] (pos).start: an i32 range takes integers within +-2^53, found 0.5"}},
  };
  return t;
}

}  // namespace

TEST(BadGraphs, EveryFileIsALocatedUserError) {
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".json") files.insert(e.path().filename().string());
  EXPECT_GE(files.size(), 20u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    auto it = expectations().find(f);
    EXPECT_NE(it, expectations().end()) << f << " has no row in the table of test_bad_graphs.cpp";
    std::string path = (kDir / f).string();
    std::string msg;
    try {
      load_graph_file(path);
      ADD_FAILURE() << f << " loaded without an error";
      continue;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::User) << e.what();
      msg = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << f << ": not a kiln::Error: " << e.what();
      continue;
    }
    // The message starts with the file path, and names the place and the problem.
    EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
    if (it == expectations().end()) continue;
    for (const std::string& want : it->second)
      EXPECT_NE(msg.find(want), std::string::npos) << "missing '" << want << "' in: " << msg;
  }
  // Every row names a file that exists (a renamed file must not silently drop its check).
  for (const auto& [f, want] : expectations())
    EXPECT_TRUE(files.count(f)) << "table row for missing file " << f;
}

// The helper weight file of the bad graphs is itself good: the bad ones fail for their own reason.
TEST(BadGraphs, HelperWeightsAreGood) {
  auto t = read_safetensors((kDir / "weights.safetensors").string());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.at("w").shape, (std::vector<int64_t>{4, 2, 3, 3}));
  EXPECT_EQ(t.at("w").to_f64()[71], static_cast<double>(0.71f));
  EXPECT_EQ(t.at("w16").to_f64(), (std::vector<double>{1, 2, 3, 4}));
  // A good graph beside the bad ones, using that file, loads.
  std::string good = R"({"kiln": 1,
    "inputs": {"x": {"dtype": "f32", "shape": ["N", 2, 8, 8]}},
    "constants": {"w": {"dtype": "f32", "shape": [4, 2, 3, 3], "layout": "NHWC",
                        "file": "weights.safetensors"}},
    "nodes": [{"op": "conv2d", "name": "conv1", "inputs": ["x", "w"], "outputs": ["y"]}],
    "outputs": ["y"]})";
  Graph g = load_graph_string(good, "good.json", kDir.string());
  EXPECT_EQ(g.tensor(g.find("w")).data->to_f64()[1], static_cast<double>(0.01f));
}
