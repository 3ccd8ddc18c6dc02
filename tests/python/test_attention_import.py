"""Tiny Hugging Face BERT, GPT-2 and ViT (2 layers, hidden 64, 2 heads of 32), exported the way
bench/bench_zoo.py exports their full-size models (eager attention; BERT and ViT with the legacy
exporter at opset 17, GPT-2 with the dynamo exporter at opset 18; dynamic N and S), imported
with --dtype f16: every layer's attention, mask included, plans as one fused Attention group.
Needs torch and transformers (CPU builds are enough); skipped, with the reason, without them."""
import os
import re
import subprocess

import pytest

from conftest import IMPORTER, IMPORTER_ENV, KILN, KILN_ENV

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
transformers = pytest.importorskip("transformers",
                                   reason="transformers is not installed (pip install transformers)")

LAYERS = 2


class Wrap(torch.nn.Module):
    def __init__(self, m, kind):
        super().__init__()
        self.m, self.kind = m, kind

    def forward(self, input_ids, attention_mask=None):
        if self.kind == "bert":
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if self.kind == "gpt2":
            return self.m(input_ids=input_ids, use_cache=False).last_hidden_state
        return self.m(pixel_values=input_ids).last_hidden_state


def build(kind):
    t = transformers
    torch.manual_seed(0)
    if kind == "bert":
        cfg = t.BertConfig(hidden_size=64, num_hidden_layers=LAYERS, num_attention_heads=2,
                           intermediate_size=128, vocab_size=100, attn_implementation="eager")
        m = t.BertModel(cfg, add_pooling_layer=False)
        xs = (torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.int64))
        names = ["input_ids", "attention_mask"]
        axes = {"input_ids": {0: "N", 1: "S"}, "attention_mask": {0: "N", 1: "S"}}
    elif kind == "gpt2":
        cfg = t.GPT2Config(n_embd=64, n_layer=LAYERS, n_head=2, vocab_size=100, n_positions=64,
                           use_cache=False, attn_implementation="eager")
        m = t.GPT2Model(cfg)
        xs, names, axes = (torch.randint(0, 100, (2, 8)),), ["input_ids"], {"input_ids": {0: "N", 1: "S"}}
    else:
        cfg = t.ViTConfig(hidden_size=64, num_hidden_layers=LAYERS, num_attention_heads=2,
                          intermediate_size=128, image_size=32, patch_size=8,
                          attn_implementation="eager")
        m = t.ViTModel(cfg, add_pooling_layer=False)
        xs, names, axes = (torch.randn(2, 3, 32, 32),), ["input_ids"], {"input_ids": {0: "N"}}
    axes["y"] = {0: "N"}
    return Wrap(m.eval(), kind), xs, names, axes


@pytest.mark.parametrize("kind,dynamo", [("bert", False), ("gpt2", True), ("vit", False)])
def test_imported_attention_is_one_fused_group_per_layer(tmp_path, kind, dynamo):
    if not os.path.exists(KILN):
        pytest.skip(f"no kiln CLI at {KILN} (build it, or set KILN_CLI)")
    m, xs, names, axes = build(kind)
    path = str(tmp_path / f"{kind}.onnx")
    with torch.no_grad():
        torch.onnx.export(m, xs, path, dynamo=dynamo, input_names=names, output_names=["y"],
                          opset_version=18 if dynamo else 17, dynamic_axes=axes,
                          do_constant_folding=True)
    out = tmp_path / "out"
    r = subprocess.run(IMPORTER + [path, "--out", str(out), "--dtype", "f16"], env=IMPORTER_ENV,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    graph = out / f"{kind}.json"
    r = subprocess.run([KILN, "plan", str(graph), "--arch", "sm_90"], env=KILN_ENV,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    groups = re.findall(r"^group \d+ \[attention\]", r.stdout, re.M)
    kernels = re.findall(r"\battention_f16_d32_q64\w*", r.stdout)
    assert len(groups) == LAYERS, r.stdout
    assert len(kernels) >= LAYERS, r.stdout
    # Every softmax is inside an attention group (none is a row-norm kernel of its own).
    assert re.search(r"^group \d+ \[rownorm\] \S*softmax", r.stdout, re.M) is None, r.stdout
    if kind != "vit":  # BERT's padding and GPT-2's causal masks are read by the kernel
        assert all("_maskadd" in k for k in kernels), kernels
