#!/usr/bin/env python3
"""Model-zoo bench (issue 20): torchvision, Hugging Face and a diffusers-style UNet through ONNX -> kiln.

Each model of the zoo (--list) gets random weights with random BatchNorm statistics (measured on
random inputs, then perturbed; randomize_norms), norm affine weights ~ U(0.8, 1.2) and biases
~ N(0, 0.1), the BatchNorm that ends each residual branch at a gain ~ U(0.2, 0.5) (as trained nets
have: damp_residual_branches), eval mode, and goes through these stages, each recorded
separately (a failing stage records its error; the model's later stages that need it are
skipped, and the next model still runs):

  export   torch.onnx.export, opset --opset, a dynamic batch N (and sequence S for the text
           models): the legacy exporter (dynamo=False) first, the dynamo exporter when it fails;
  import   `kiln import --dtype f32 --layout NHWC` (the f32 check) and `--dtype f16 --layout NHWC`
           (the f16 check and the timing); a refusal records kiln's one-line message;
  f32      `kiln run` of the f32 graph on random inputs vs torch f32 with TF32 off: max |a - b| /
           max |b| (target 1e-4); classifiers: top-1 agreement over --check-images images;
  f16      the f16 graph vs the same torch f32 (target 1e-2), with torch f16 (channels_last)
           against that f32 and kiln against torch f16 beside;
  time     at each --batches N: `kiln bench --cuda-graph --json` median vs torch f16 eager,
           eager + CUDA graph and torch.compile(mode="reduce-overhead", inductor freezing), all
           do_bench medians with the L2 flushed (as bench/bench_resnet50.py).

Results are JSON lines appended to --out FILE as the run goes ("begin" lines per stage, one
"result" line per model), so a run killed by its time limit keeps what it measured; --resume skips
the models FILE already has (a model whose run was killed shows as killed in its last stage and is
skipped too unless --retry-killed). At the end a markdown table is printed (and written to FILE.md);
--table FILE... renders the table from JSON-lines files alone (no torch needed, nor for --list and
--help).

    python3 bench/bench_zoo.py --out $OUT/zoo.jsonl [--models a,b | --families f,g] [--batches 32]
        [--stages export,import,f32,f16,time] [--skip-compile] [--model-timeout 300] [--resume]
    python3 bench/bench_zoo.py --list [--families resnet,vit]
    python3 bench/bench_zoo.py --table zoo1.jsonl zoo2.jsonl [--markdown-out docs_table.md]
"""
import argparse
import copy
import datetime
import importlib.util
import json
import math
import os
import re
import shlex
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools"))

from bench_resnet50 import (Fp32Ieee, KilnError, capture_cuda_graph, compare,  # noqa: E402
                            do_bench_ms, export_onnx, kiln_bench, kiln_env, kiln_import, rel_err_t,
                            run_cmd, tail)

F32_TARGET = 1e-4  # max |kiln - torch| / max |torch|, kiln f32 vs torch f32 (TF32 off)
F16_TARGET = 1e-2  # the same, kiln f16 vs torch f32 (TF32 off)
STAGES = ("export", "import", "f32", "f16", "time")


# ------------------------------------------------------------------------------- the zoo

class Entry:
    """One model: `build` names a builder below (called with torch imported); `inputs` lists
    (name, kind, shape) with kind "float" (randn), "ids" (token ids below `vocab`) or "mask"
    (1 then 0 padding per row) and shape dims ints or the symbols "N", "S", "H" (--image-size /
    --seg-size / the model's own size)."""

    def __init__(self, name, family, build, inputs, classify=False, arg=None, size=None, vocab=None,
                 exporters=("legacy", "dynamo")):
        self.name, self.family, self.build, self.inputs = name, family, build, inputs
        self.classify, self.arg, self.size, self.vocab, self.exporters = classify, arg, size, vocab, exporters

    def shapes(self, args, n, s=None):
        """{input name: concrete shape} at batch n (and sequence s, default --seq)."""
        size = self.size or (args.seg_size if self.family in SEG_FAMILIES else args.image_size)
        sub = {"N": n, "S": s or args.seq, "H": size}
        return {name: tuple(sub.get(d, d) for d in shape) for name, _, shape in self.inputs}

    def symbols(self):
        return sorted({d for _, _, shape in self.inputs for d in shape if d in ("N", "S")})


IMAGE = [("x", "float", ("N", 3, "H", "H"))]
SEG_FAMILIES = ("fcn", "deeplabv3", "lraspp")

# One model per torchvision classification family (its usual representative), the segmentation
# models, the Hugging Face models (built from configs: no downloads) and the UNet.
TORCHVISION = [
    ("alexnet", "alexnet"), ("convnext_tiny", "convnext"), ("densenet121", "densenet"),
    ("efficientnet_b0", "efficientnet"), ("efficientnet_v2_s", "efficientnet_v2"), ("googlenet", "googlenet"),
    ("inception_v3", "inception_v3"), ("maxvit_t", "maxvit"), ("mnasnet1_0", "mnasnet"),
    ("mobilenet_v2", "mobilenet_v2"), ("mobilenet_v3_large", "mobilenet_v3"), ("regnet_y_400mf", "regnet"),
    ("resnet50", "resnet"), ("resnext50_32x4d", "resnext"), ("shufflenet_v2_x1_0", "shufflenet_v2"),
    ("squeezenet1_1", "squeezenet"), ("swin_t", "swin"), ("swin_v2_t", "swin_v2"), ("vgg16", "vgg"),
    ("vit_b_16", "vit"), ("wide_resnet50_2", "wide_resnet"),
]
ZOO = [Entry(n, f, "torchvision", IMAGE, classify=True, arg=n, size=299 if n == "inception_v3" else None)
       for n, f in TORCHVISION]
ZOO += [Entry(n, f, "torchvision_seg", IMAGE, arg=n) for n, f in (
    ("fcn_resnet50", "fcn"), ("deeplabv3_resnet50", "deeplabv3"), ("lraspp_mobilenet_v3_large", "lraspp"))]
ZOO += [
    Entry("hf_bert_base", "hf_bert", "hf_bert",
          [("input_ids", "ids", ("N", "S")), ("attention_mask", "mask", ("N", "S"))], vocab=30522),
    # The causal mask comes from the model itself (a full-sequence forward, no KV cache); the
    # dynamo exporter first: it traces transformers' mask construction that the legacy one may not.
    Entry("hf_gpt2", "hf_gpt2", "hf_gpt2", [("input_ids", "ids", ("N", "S"))], vocab=50257,
          exporters=("dynamo", "legacy")),
    Entry("hf_vit_base", "hf_vit", "hf_vit", [("pixel_values", "float", ("N", 3, 224, 224))]),
    Entry("hf_clip_vision_b32", "hf_clip_vision", "hf_clip_vision", [("pixel_values", "float", ("N", 3, 224, 224))]),
    Entry("hf_whisper_base_encoder", "hf_whisper_encoder", "hf_whisper_encoder",
          [("input_features", "float", ("N", 80, 3000))]),
    Entry("unet_small", "unet", "unet", [("x", "float", ("N", 4, 64, 64))]),
]
BY_NAME = {e.name: e for e in ZOO}


def select(args):
    """The entries --models / --families name (all by default), in zoo order; exits 2 on an
    unknown name."""
    chosen = list(ZOO)
    if args.families:
        fams = [f for f in args.families.split(",") if f]
        unknown = [f for f in fams if f not in {e.family for e in ZOO}]
        if unknown:
            usage_exit(f"unknown family {', '.join(unknown)} (families: {', '.join(sorted({e.family for e in ZOO}))})")
        chosen = [e for e in chosen if e.family in fams]
    if args.models:
        names = [m for m in args.models.split(",") if m]
        unknown = [m for m in names if m not in BY_NAME]
        if unknown:
            usage_exit(f"unknown model {', '.join(unknown)} (see --list)")
        chosen = [e for e in chosen if e.name in names]
    if args.shard:
        i, n = args.shard
        chosen = chosen[(i - 1) * len(chosen) // n:i * len(chosen) // n]
    return chosen


def usage_exit(msg):
    print(f"bench_zoo: error: {msg}", file=sys.stderr)
    sys.exit(2)


def list_text(entries, args):
    lines = [f"{'model':28} {'family':20} {'check':8} inputs (at N=1)"]
    for e in entries:
        shapes = e.shapes(args, 1)
        ins = ", ".join(f"{n} {k}[{','.join(map(str, shapes[n]))}]" for n, k, _ in e.inputs)
        lines.append(f"{e.name:28} {e.family:20} {'top-1' if e.classify else 'rel err':8} {ins}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- builders (torch)

def randomize_norms(torch, m, calibrated=False):
    """Random BatchNorm statistics and norm affine weights, so that folding them is exercised (a
    fresh BatchNorm is the identity). Calibrated statistics are perturbed (mean shifted by up to
    0.1 standard deviations, variance scaled by 0.5..1.5) instead of replaced."""
    nn = torch.nn
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm) and mod.running_mean is not None:
                if calibrated:
                    sd = mod.running_var.clamp_min(1e-6).sqrt()
                    mod.running_mean.add_(sd * torch.empty_like(sd).uniform_(-0.1, 0.1))
                    mod.running_var.mul_(torch.empty_like(sd).uniform_(0.8, 1.25))
                else:
                    mod.running_mean.normal_(0.0, 0.1)
                    mod.running_var.uniform_(0.5, 1.5)
            if isinstance(mod, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)):
                if getattr(mod, "weight", None) is not None:
                    # Calibrated: milder, as deep residual nets (EfficientNetV2-S) compound a
                    # per-layer gain up to 1.5 into outputs of ~1e6 (beyond f16, and beyond what
                    # f32 itself computes to 1e-4).
                    lo, hi = (0.8, 1.2) if calibrated else (0.5, 1.5)
                    mod.weight.uniform_(lo, hi)
                if getattr(mod, "bias", None) is not None:
                    mod.bias.normal_(0.0, 0.1)


def calibrate_batchnorms(torch, m, xs):
    """BatchNorm running statistics measured on a batch of random inputs (then perturbed by
    randomize_norms): with the fresh statistics (mean 0, var 1) or purely random ones, a deep net
    whose init does not preserve scale (Inception-v3's N(0, 0.1) filters) grows its activations
    layer by layer to ~1e14 in f32, beyond f16's range, and no f16 comparison means anything."""
    bns = [mod for mod in m.modules() if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    # Only the BatchNorms in training mode: stochastic depth and dropout stay off (EfficientNet's
    # stochastic depth, on in m.train(), dropped whole residual branches from the statistics, and
    # the eval-mode network then grew its outputs to ~1e6).
    m.eval()
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # a cumulative average: the statistics of this one batch
        bn.train()
    with torch.no_grad():
        m(*xs)
    m.eval()


def build_model(torch, e, seed, args=None):
    """The entry's torch module (eval, f32, CPU) returning one tensor. With `args`, BatchNorm
    statistics are first calibrated on random inputs (calibrate_batchnorms)."""
    torch.manual_seed(seed)
    m = BUILDERS[e.build](torch, e)
    if args is not None:
        gen = torch.Generator().manual_seed(seed + 1)
        calibrate_batchnorms(torch, m, make_inputs(torch, e, args, 4, gen))
    m = m.eval()
    randomize_norms(torch, m, calibrated=args is not None)
    damp_residual_branches(torch, m)
    randomize_zero_weights(torch, m)
    return m


# The scale of the last BatchNorm of a residual branch. A random branch that adds a unit-variance
# signal to the stream at every block makes a deep net chaotic: ResNet-50 amplifies a relative
# perturbation ~1.3x per block, and torch's own f16 ends 2.6e-2 from its f64 result (the same
# model with these gains: 9e-4). Trained nets are not chaotic: their branch-final BatchNorms
# learn small gains, which is why torchvision's zero_init_residual and Goyal et al.'s zero-gamma
# init start them at 0. Nonzero, so that the branch is still computed and checked.
RESIDUAL_GAIN = (0.2, 0.5)


def damp_residual_branches(torch, m):
    """Gains ~ U(RESIDUAL_GAIN) for the BatchNorm that ends each residual branch, found by tracing
    m with torch.fx: of an add's two operands, the branch is the deeper one (the shortcut is the
    block's input or a shorter projection of it), and its BatchNorm may sit behind what is the
    identity in eval mode (stochastic depth, dropout). A model fx cannot trace is damped in the
    children that trace; the Hugging Face ones (LayerNorm-based, untraceable) keep their gains.
    Returns how many BatchNorms were damped."""
    try:
        gm = torch.fx.symbolic_trace(m)
    except Exception:  # noqa: BLE001 - untraceable (a segmentation head's interpolate to the
        # input's size): the submodules that trace (its backbone) are damped on their own
        return sum(damp_residual_branches(torch, c) for c in m.children())
    return _damp_traced(torch, gm)


def _damp_traced(torch, gm):
    import operator
    mods = dict(gm.named_modules())
    nn = torch.nn
    adds = {operator.add, operator.iadd, torch.add}

    def identity_in_eval(node):
        if node.op == "call_module":
            mod = mods.get(node.target)
            return isinstance(mod, (nn.Dropout, nn.Identity)) or type(mod).__name__ == "StochasticDepth"
        return node.op == "call_function" and getattr(node.target, "__name__", "") in (
            "stochastic_depth", "dropout")

    def batchnorm_of(node):
        while isinstance(node, torch.fx.Node):
            mod = mods.get(node.target) if node.op == "call_module" else None
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                return mod
            if not identity_in_eval(node):
                return None
            node = node.args[0]
        return None

    depth, damped = {}, {}
    for node in gm.graph.nodes:
        depth[node] = 1 + max((depth[a] for a in node.all_input_nodes), default=0)
        is_add = (node.op == "call_function" and node.target in adds) or \
            (node.op == "call_method" and node.target in ("add", "add_"))
        operands = [a for a in node.args[:2] if isinstance(a, torch.fx.Node)]
        if is_add and len(operands) == 2:
            bn = batchnorm_of(max(operands, key=lambda a: depth[a]))
            if bn is not None and bn.weight is not None:
                damped[id(bn)] = bn
    with torch.no_grad():
        for bn in damped.values():
            bn.weight.uniform_(*RESIDUAL_GAIN)
    return len(damped)


def randomize_zero_weights(torch, m):
    """Random weights for the layers an architecture initializes to zero (torchvision ViT's
    classifier head): a zero head makes every output its bias, and every comparison trivially
    exact (max error 0, one class for every image)."""
    with torch.no_grad():
        for mod in m.modules():
            w = getattr(mod, "weight", None)
            if isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d)) and w is not None and not w.any():
                w.normal_(0.0, 1.0 / max(1, w[0].numel()) ** 0.5)
                if getattr(mod, "bias", None) is not None and not mod.bias.any():
                    mod.bias.normal_(0.0, 0.1)


def single_output(torch, inner, pick):
    """`inner` wrapped so that forward returns the one tensor pick(outputs) (exports as output y)."""
    class Single(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, *xs):
            return pick(self.inner(*xs))
    return Single()


def b_torchvision(torch, e):
    import torchvision
    kw = {"aux_logits": False, "init_weights": True} if e.arg in ("googlenet", "inception_v3") else {}
    return torchvision.models.get_model(e.arg, weights=None, **kw)


def b_torchvision_seg(torch, e):
    import torchvision
    kw = {"aux_loss": False} if not e.arg.startswith("lraspp") else {}
    m = torchvision.models.get_model(e.arg, weights=None, weights_backbone=None, **kw)
    return single_output(torch, m, lambda o: o["out"])


def b_hf_bert(torch, e):
    from transformers import BertConfig, BertModel
    cfg = BertConfig(attn_implementation="eager")  # bert-base: 12 layers, 768 wide, 12 heads
    m = BertModel(cfg, add_pooling_layer=False)
    return single_output(torch, m, lambda o: o.last_hidden_state)


def b_hf_gpt2(torch, e):
    from transformers import GPT2Config, GPT2Model
    cfg = GPT2Config(use_cache=False, attn_implementation="eager")  # gpt2 small: 12 x 768
    m = GPT2Model(cfg)

    class Full(torch.nn.Module):  # the full sequence, causal mask inside, no KV cache
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False).last_hidden_state
    return Full()


def b_hf_vit(torch, e):
    from transformers import ViTConfig, ViTModel
    m = ViTModel(ViTConfig(attn_implementation="eager"), add_pooling_layer=False)  # ViT-B/16 224
    return single_output(torch, m, lambda o: o.last_hidden_state)


def b_hf_clip_vision(torch, e):
    from transformers import CLIPVisionConfig, CLIPVisionModel
    cfg = CLIPVisionConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                           image_size=224, patch_size=32, attn_implementation="eager")  # ViT-B/32
    return single_output(torch, CLIPVisionModel(cfg), lambda o: o.last_hidden_state)


def b_hf_whisper_encoder(torch, e):
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    cfg = WhisperConfig(d_model=512, encoder_layers=6, encoder_attention_heads=8, encoder_ffn_dim=2048,
                        num_mel_bins=80, max_source_positions=1500, attn_implementation="eager")  # base
    return single_output(torch, WhisperEncoder(cfg), lambda o: o.last_hidden_state)


def b_unet(torch, e):
    return make_unet(torch)


def make_unet(torch):
    """A diffusers-style UNet without the timestep: GroupNorm+SiLU resnet blocks, self-attention
    at the two lowest resolutions, stride-2 conv downsampling, nearest upsampling + conv, skip
    concatenations. 4 -> 4 channels, 64 x 64 latents, widths 64/128/256."""
    nn, F = torch.nn, torch.nn.functional

    class ResBlock(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            h = self.c1(F.silu(self.n1(x)))
            return self.skip(x) + self.c2(F.silu(self.n2(h)))

    class Attn(nn.Module):
        def __init__(self, c, heads=4):
            super().__init__()
            self.norm, self.heads = nn.GroupNorm(32, c), heads
            self.qkv, self.proj = nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

        def forward(self, x):
            b, c, h, w = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
            att = torch.softmax(q.transpose(-2, -1) @ k / math.sqrt(c // self.heads), dim=-1)
            o = (v @ att.transpose(-2, -1)).reshape(b, c, h, w)
            return x + self.proj(o)

    class UNet(nn.Module):
        def __init__(self, widths=(64, 128, 256)):
            super().__init__()
            self.inp = nn.Conv2d(4, widths[0], 3, padding=1)
            self.down, self.pool = nn.ModuleList(), nn.ModuleList()
            c = widths[0]
            for i, w in enumerate(widths):
                self.down.append(nn.Sequential(ResBlock(c, w), *([Attn(w)] if i > 0 else [])))
                self.pool.append(nn.Conv2d(w, w, 3, stride=2, padding=1) if i < len(widths) - 1 else nn.Identity())
                c = w
            self.mid = nn.Sequential(ResBlock(c, c), Attn(c), ResBlock(c, c))
            self.up, self.upconv = nn.ModuleList(), nn.ModuleList()
            for i, w in reversed(list(enumerate(widths))):
                self.up.append(nn.Sequential(ResBlock(c + w, w), *([Attn(w)] if i > 0 else [])))
                self.upconv.append(nn.Conv2d(w, w, 3, padding=1) if i > 0 else nn.Identity())
                c = w
            self.out_norm, self.out = nn.GroupNorm(32, c), nn.Conv2d(c, 4, 3, padding=1)

        def forward(self, x):
            h, skips = self.inp(x), []
            for blk, pool in zip(self.down, self.pool):
                h = blk(h)
                skips.append(h)
                h = pool(h)
            h = self.mid(h)
            for i, (blk, upc) in enumerate(zip(self.up, self.upconv)):
                h = blk(torch.cat([h, skips.pop()], dim=1))
                if i < len(self.up) - 1:
                    h = upc(F.interpolate(h, scale_factor=2.0, mode="nearest"))
            return self.out(F.silu(self.out_norm(h)))
    return UNet()


BUILDERS = {"torchvision": b_torchvision, "torchvision_seg": b_torchvision_seg, "hf_bert": b_hf_bert,
            "hf_gpt2": b_hf_gpt2, "hf_vit": b_hf_vit, "hf_clip_vision": b_hf_clip_vision,
            "hf_whisper_encoder": b_hf_whisper_encoder, "unet": b_unet}


# ------------------------------------------------------------------------------- inputs, export

def make_inputs(torch, e, args, n, gen):
    """The entry's inputs at batch n, CPU, f32 / int64, in entry order."""
    xs = []
    for name, kind, _ in e.inputs:
        shape = e.shapes(args, n)[name]
        if kind == "float":
            xs.append(torch.randn(*shape, generator=gen))
        elif kind == "ids":
            xs.append(torch.randint(0, e.vocab, shape, generator=gen))
        else:  # mask: each row keeps a random length >= half of S, then padding
            mask = torch.ones(*shape, dtype=torch.int64)
            for r in range(shape[0]):
                keep = int(torch.randint(shape[1] // 2, shape[1] + 1, (1,), generator=gen))
                mask[r, keep:] = 0
            xs.append(mask)
    return xs


def dynamic_axes(e):
    axes = {name: {i: d for i, d in enumerate(shape) if d in ("N", "S")} for name, _, shape in e.inputs}
    axes["y"] = {0: "N"}
    return axes


def export_model(torch, e, m, path, args):
    """torch.onnx.export in the entry's exporter order; returns the stage record (exporter used,
    the failed attempts' errors). Raises when every exporter fails."""
    gen = torch.Generator().manual_seed(args.seed + 7)
    xs = make_inputs(torch, e, args, 2, gen)
    names = [n for n, _, _ in e.inputs]
    rec, failures = {}, []
    for exporter in e.exporters:
        t0 = time.perf_counter()
        try:
            if exporter == "legacy" and e.inputs == IMAGE:
                export_onnx(m, tuple(xs[0].shape[1:]), path, args.opset)  # bench_resnet50's export
            else:
                with torch.no_grad():
                    torch.onnx.export(m, tuple(xs), path, dynamo=exporter == "dynamo", input_names=names,
                                      output_names=["y"], opset_version=export_opset(exporter, args),
                                      dynamic_axes=dynamic_axes(e), do_constant_folding=True)
            if exporter == "dynamo":
                rename_dims(path, e)
            rec.update(exporter=exporter, export_s=round(time.perf_counter() - t0, 2),
                       bytes=os.path.getsize(path), opset=export_opset(exporter, args))
            if failures:
                rec["failed_exporters"] = failures
            return rec
        except Exception as ex:  # noqa: BLE001 - the next exporter gets its chance
            failures.append({"exporter": exporter, "error": err_text(ex)})
    raise RuntimeError("; ".join(f"{f['exporter']}: {f['error']}" for f in failures))


def export_opset(exporter, args):
    """The dynamo exporter (onnxscript) builds opset-18 graphs; asked for an older opset it
    converts them down but leaves opset 18's Split `num_outputs` (GPT-2's qkv split), a model
    onnxruntime and the importer refuse as invalid. It exports at opset 18 at least."""
    return max(args.opset, 18) if exporter == "dynamo" else args.opset


def rename_dims(path, e):
    """The dynamo exporter names dynamic dims itself (s0, batch, ...): rename them to the entry's
    N / S everywhere in the model, so that `--shape N=..` means the batch. Saves the model with
    its weights inline (the dynamo exporter may write them beside it)."""
    import onnx
    model = onnx.load(path)
    g = model.graph
    ren = {}
    by_name = {n: shape for n, _, shape in e.inputs}
    for vi in g.input:
        for d, want in zip(vi.type.tensor_type.shape.dim, by_name.get(vi.name, ())):
            if want in ("N", "S") and d.dim_param and d.dim_param != want:
                ren[d.dim_param] = want
    if ren:
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            for d in vi.type.tensor_type.shape.dim:
                if d.dim_param in ren:
                    d.dim_param = ren[d.dim_param]
    onnx.save(model, path)


# ------------------------------------------------------------------------------- kiln helpers

def err_text(ex, n=600):
    return f"{ex.__class__.__name__}: {ex}"[:n]


def one_line(rec):
    """kiln's (or onnx2kiln's) one-line error of a failed subprocess record, else its error."""
    lines = [l.strip() for l in (rec.get("stderr_tail") or "").splitlines() if "error:" in l]
    return (lines[-1] if lines else rec.get("error", "failed"))[:400]


def graph_inputs(graph):
    """[(name, dtype, shape)] of an imported graph's inputs, in file order."""
    with open(graph) as f:
        g = json.load(f)
    ins = g.get("inputs", {})
    items = ins.items() if isinstance(ins, dict) else ((i.get("name"), i) for i in ins)
    return [(n, s.get("dtype"), s.get("shape")) for n, s in items]


def shape_flags(graph, seq):
    """The --shape flags kiln bench needs besides N=..: S=seq when the graph has the symbol S."""
    syms = {d for _, _, shape in graph_inputs(graph) for d in (shape or []) if isinstance(d, str)}
    return ["--shape", f"S={seq}"] if "S" in syms else []


def kiln_outputs_multi(kiln, graph, xs, work, cache_dir, timeout, tag, device="gpu"):
    """`kiln run --inputs` of a graph with several inputs (xs in graph-input order, numpy);
    returns its only output as f32 numpy. Raises KilnError."""
    from onnx2kiln.safetensors import DTYPES, read_safetensors, write_safetensors
    ins = graph_inputs(graph)
    if len(ins) != len(xs):
        raise KilnError({"error": f"{graph} has {len(ins)} inputs, the model {len(xs)}"})
    for name, dtype, _ in ins:
        if dtype not in DTYPES:
            raise KilnError({"error": f"graph input {name} has dtype {dtype}: no safetensors writer for it"})
    ipath, opath = os.path.join(work, f"{tag}.inputs.safetensors"), os.path.join(work, f"{tag}.got.safetensors")
    write_safetensors(ipath, {name: (dtype, x) for (name, dtype, _), x in zip(ins, xs)})
    rec, _ = run_cmd([kiln, "run", graph, "--inputs", ipath, "--output", opath, "--device", device], timeout,
                     kiln_env(cache_dir))
    os.remove(ipath)
    if not rec["ok"]:
        raise KilnError(rec)
    got = read_safetensors(opath)
    if len(got) != 1:
        raise KilnError({"error": f"{opath}: expected one output, found {sorted(got)}"})
    return next(iter(got.values()))


def kiln_outputs_any(kiln, graph, xs, dtype, work, cache_dir, timeout, tag, device="gpu"):
    """The graph's output on inputs xs (CPU torch tensors): float inputs stored as `dtype`;
    `kiln run --device device` (cpu: kiln's CPU reference)."""
    from bench_resnet50 import kiln_outputs
    arrs = [x.half().numpy() if dtype == "f16" and x.is_floating_point() else x.numpy() for x in xs]
    if len(arrs) == 1 and xs[0].is_floating_point():  # token ids (GPT-2) keep the graph's int dtype
        return kiln_outputs(kiln, graph, arrs[0], dtype, work, cache_dir, timeout, tag, device=device)
    return kiln_outputs_multi(kiln, graph, arrs, work, cache_dir, timeout, tag, device=device)


# ------------------------------------------------------------------------------- torch side

class Fp32Strict:
    """TF32 off for cuDNN convolutions (bench_resnet50's Fp32Ieee) and for cuBLAS matmuls (the
    transformers): an IEEE f32 reference for the 1e-4 check; restored on exit."""

    def __init__(self, torch):
        self.torch, self.conv = torch, Fp32Ieee(torch)

    def __enter__(self):
        self.conv.__enter__()
        mm = self.torch.backends.cuda.matmul
        self.attr = "fp32_precision" if self.conv.new_api and hasattr(mm, "fp32_precision") else "allow_tf32"
        self.old = getattr(mm, self.attr)
        setattr(mm, self.attr, "ieee" if self.attr == "fp32_precision" else False)
        return self

    def __exit__(self, *exc):
        setattr(self.torch.backends.cuda.matmul, self.attr, self.old)
        return self.conv.__exit__(*exc)


def to_device(torch, xs, half, device="cuda"):
    """Inputs on the GPU (or `device`): float ones as f16 when `half`, 4-D ones channels_last then."""
    out = []
    for x in xs:
        x = x.to(device)
        if half and x.is_floating_point():
            x = x.half()
            if x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
        out.append(x)
    return out


def torch_outputs(torch, m, xs, chunk, half, device="cuda"):
    """m on xs in chunks of `chunk` rows, as f32 numpy (concatenated)."""
    import numpy as np
    outs = []
    with torch.inference_mode():
        for a in range(0, xs[0].shape[0], chunk):
            y = m(*to_device(torch, [x[a:a + chunk] for x in xs], half, device))
            outs.append(y.float().cpu().numpy())
    return np.concatenate(outs)


def model16(torch, e, m):
    m16 = copy.deepcopy(m).half().cuda()
    if any(len(shape) == 4 for _, _, shape in e.inputs):
        m16 = m16.to(memory_format=torch.channels_last)
    return m16


def time_torch(torch, e, m16, n, args, out, compile_why_not=None):
    """Adds the eager, eager_graph and compile rows at batch n (each with ms or error) to `out` as
    they are measured (a timeout keeps the ones before it); returns it."""
    gen = torch.Generator().manual_seed(args.seed + 3)
    xs = to_device(torch, make_inputs(torch, e, args, n, gen), half=True)
    try:
        with torch.inference_mode():
            ref = m16(*xs)
            out["eager"] = {"ms": round(do_bench_ms(lambda: m16(*xs), args), 4)}
    except Exception as ex:  # noqa: BLE001 - recorded; the other systems still run
        out["eager"] = {"error": err_text(ex)}
        return out
    try:
        with torch.inference_mode():
            g, y = capture_cuda_graph(torch, lambda inp: m16(*inp), xs)
            g.replay()
            torch.cuda.synchronize()
            out["eager_graph"] = {"ms": round(do_bench_ms(g.replay, args), 4), "vs_eager": rel_err_t(y, ref)}
        g = y = None
    except Exception as ex:  # noqa: BLE001
        out["eager_graph"] = {"error": err_text(ex)}
    torch.cuda.empty_cache()
    if args.skip_compile or compile_why_not:
        out["compile"] = {"skipped": compile_why_not or "--skip-compile"}
        return out
    try:
        import torch._inductor.config as icfg
        icfg.freezing = True  # weights become constants: what a deployment compiles
        mc = torch.compile(m16, mode="reduce-overhead", dynamic=False)
        with torch.inference_mode():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            y = mc(*xs).clone()  # reduce-overhead: the next replay overwrites its output
            torch.cuda.synchronize()
            first = round(time.perf_counter() - t0, 2)
            out["compile"] = {"ms": round(do_bench_ms(lambda: mc(*xs), args), 4), "first_call_s": first,
                              "vs_eager": rel_err_t(y, ref)}
    except Exception as ex:  # noqa: BLE001
        out["compile"] = {"error": err_text(ex)}
    finally:
        mc = None
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    return out


# ------------------------------------------------------------------------------- one model

class ModelTimeout(BaseException):
    """The per-model limit (SIGALRM): ends the model, not the run (BaseException, so that the
    stages' `except Exception` do not swallow it)."""


class ModelRun:
    """One model's stages and its JSON-lines record."""

    def __init__(self, e, args, log):
        self.e, self.args, self.log = e, args, log
        self.rec = {"type": "result", "model": e.name, "family": e.family, "classify": e.classify,
                    "stages": {}, "timing": {}}
        self.t0 = time.perf_counter()

    def stage(self, name):
        return _Stage(self, name)

    def ok(self, name):
        return self.rec["stages"].get(name, {}).get("ok", False)


class _Stage:
    def __init__(self, run, name):
        self.run, self.name = run, name

    def __enter__(self):
        self.t0 = time.perf_counter()
        self.run.log.write({"type": "begin", "model": self.run.e.name, "stage": self.name})
        self.rec = self.run.rec["stages"].setdefault(self.name, {})
        return self.rec

    def __exit__(self, et, ev, tb):
        self.rec["s"] = round(time.perf_counter() - self.t0, 2)
        if et is None:
            self.rec.setdefault("ok", True)
        elif issubclass(et, KilnError):
            self.rec.update(ok=False, error=one_line(ev.rec), stderr_tail=tail(ev.rec.get("stderr_tail"), 600))
        elif issubclass(et, Exception):
            self.rec.update(ok=False, error=err_text(ev))
        else:  # ModelTimeout, SystemExit (SIGTERM), KeyboardInterrupt: recorded, then passed on
            self.rec.update(ok=False, error=f"{'timed out' if et is ModelTimeout else 'interrupted'} "
                                            f"in this stage ({ev})")
            return False
        status = "ok" if self.rec["ok"] else f"FAILED: {self.rec.get('error', 'above its target')}"
        if "max_rel_err" in self.rec:
            status += f", max rel err {self.rec['max_rel_err']:.3g}" + (
                f", top-1 {self.rec['top1_agree']}/{self.rec['images']}" if "top1_agree" in self.rec else "")
        print(f"[{self.run.e.name}] {self.name}: {status} ({self.rec['s']} s)", flush=True)
        return True  # an Exception is recorded: the next stages check ok() and go on


def check_stage(torch, run, m, m16, graph, dtype, work, cache_dir, kiln):
    """kiln `dtype` vs torch `dtype` (f32 with TF32 off) on random inputs; returns the record."""
    e, args = run.e, run.args
    n = args.check_images if e.classify else args.check_samples
    gen = torch.Generator().manual_seed(args.seed + 1)
    xs = make_inputs(torch, e, args, n, gen)
    cpu = args.device == "cpu"
    if dtype == "f32" and cpu:  # torch f32 on the CPU (IEEE) against kiln's CPU reference
        ref = torch_outputs(torch, m, xs, args.check_chunk, half=False, device="cpu")
    elif dtype == "f32":
        m32 = copy.deepcopy(m).cuda()
        with Fp32Strict(torch):
            ref = torch_outputs(torch, m32, xs, args.check_chunk, half=False)
        del m32
        torch.cuda.empty_cache()
    else:
        ref = torch_outputs(torch, m16, xs, args.check_chunk, half=True)
        # The f32 truth too (TF32 off): how far kiln f16 and torch f16 each are from it tells a
        # model whose random weights f16 cannot carry from an error of kiln's.
        m32 = copy.deepcopy(m).cuda()
        with Fp32Strict(torch):
            ref32 = torch_outputs(torch, m32, xs, args.check_chunk, half=False)
        del m32
        torch.cuda.empty_cache()
    import numpy as np
    got = np.concatenate([kiln_outputs_any(kiln, graph, [x[a:a + args.check_chunk] for x in xs], dtype, work,
                                           cache_dir, args.timeout, f"check_{dtype}_{a}", args.device)
                          for a in range(0, n, args.check_chunk)])
    if dtype == "f16":
        # f16 is judged against the f32 truth, as TensorRT's accuracy checks judge reduced
        # precision against FP32: torch f16 carries its own rounding, and the difference of two
        # f16 results adds both errors. torch f16 against the same truth, and kiln against torch
        # f16, are recorded beside.
        c = compare(got, ref32)
        c["reference"] = "torch f32 (TF32 off)"
        c["torch_f16_vs_f32"] = compare(ref, ref32).get("max_rel_err")
        c["kiln_vs_torch_f16"] = compare(got, ref).get("max_rel_err")
    else:
        c = compare(got, ref)
    if not e.classify:
        for k in ("top1_agree", "distinct_top1_classes_ref", "min_top1_margin_rel"):
            c.pop(k, None)
    target = F32_TARGET if dtype == "f32" else F16_TARGET
    c.update(target=target, ok=bool(c.get("max_rel_err", math.inf) <= target))
    if cpu:
        c["device"] = "cpu (kiln CPU reference vs torch f32 on the CPU)"
    return c


def run_model(torch, e, args, work, cache_dir, kiln, log):
    """All selected stages of one model; returns its result record (partial when interrupted)."""
    run = ModelRun(e, args, log)
    mdir = os.path.join(work, e.name)
    os.makedirs(mdir, exist_ok=True)
    onnx_path = os.path.join(mdir, f"{e.name}.onnx")
    graphs, m, m16 = {}, None, None
    stages = args.stage_list
    try:
        with run.stage("build") as r:
            m = build_model(torch, e, args.seed, args)
            r["params_m"] = round(sum(p.numel() for p in m.parameters()) / 1e6, 2)
        if "export" in stages and run.ok("build"):
            with run.stage("export") as r:
                if args.reuse_exports and os.path.isfile(onnx_path):
                    r.update(reused=onnx_path, bytes=os.path.getsize(onnx_path))
                else:
                    r.update(export_model(torch, e, m, onnx_path, args))
        if "import" in stages and run.ok("export"):
            for dtype in ("f32", "f16"):
                with run.stage(f"import_{dtype}") as r:
                    rec, graph = kiln_import(kiln, onnx_path, os.path.join(mdir, f"kiln_{dtype}"), dtype, "NHWC",
                                             cache_dir, args.timeout, name=e.name)
                    r.update(wall_s=rec["wall_s"])
                    if graph is None:
                        raise KilnError(rec)
                    graphs[dtype] = graph
        if run.ok("build") and ({"f16", "time"} & set(stages)):
            m16 = model16(torch, e, m)
        for dtype in ("f32", "f16"):
            if dtype in stages and dtype in graphs:
                with run.stage(dtype) as r:
                    r.update(check_stage(torch, run, m, m16, graphs[dtype], dtype, mdir, cache_dir, kiln))
        if "time" in stages and m16 is not None:
            for n in args.batch_list:
                with run.stage(f"time_N{n}") as r:
                    row = run.rec["timing"].setdefault(str(n), {})
                    if "f16" in graphs:
                        kb = kiln_bench(kiln, graphs["f16"], n, True, mdir, cache_dir, args.timeout,
                                        str(args.kiln_warmup), str(args.kiln_iters),
                                        shape_flags(graphs["f16"], args.seq) + ([] if args.no_specialize else ["--specialize"]) +
                                        shlex.split(args.kiln_bench_args))
                        row["kiln"] = {k: kb[k] for k in ("ms", "kernels", "host_us_per_run", "compile_ms",
                                                          "specialized_ms", "error", "cmd") if k in kb}
                        if "error" in kb:
                            row["kiln"]["error"] = one_line(kb)
                    else:
                        row["kiln"] = {"error": "no f16 graph"}
                    time_torch(torch, e, m16, n, args, row,
                               None if "ms" in row["kiln"] else "kiln has no time to compare with")
                    print(f"[{e.name}] N={n}: " + ", ".join(f"{k} {v.get('ms', 'ERR')}" for k, v in row.items()),
                          flush=True)
    except ModelTimeout as ex:
        run.rec["timed_out"] = str(ex)
    except (SystemExit, KeyboardInterrupt) as ex:
        run.rec["interrupted"] = f"{ex.__class__.__name__} {getattr(ex, 'code', '')}".strip()
        raise
    finally:
        signal.alarm(0)  # the limit covers the stages, not the bookkeeping below
        run.rec["elapsed_s"] = round(time.perf_counter() - run.t0, 1)
        log.write(run.rec)
        m = m16 = None
        if not args.keep:
            import shutil
            shutil.rmtree(mdir, ignore_errors=True)
        torch.cuda.empty_cache()
    return run.rec


# ------------------------------------------------------------------------------- JSON lines

class JsonLines:
    """Appends one JSON object per line to `path` (flushed and fsynced: a killed run keeps it)."""

    def __init__(self, path):
        self.path = path
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)

    def write(self, obj):
        obj = dict(obj, time=datetime.datetime.now().isoformat(timespec="seconds"))
        with open(self.path, "a") as f:
            f.write(json.dumps(obj, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())


def read_jsonl(paths):
    """Every object of the files, in order; a truncated last line (a kill mid-write) is skipped."""
    out = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    return out


def model_states(objs):
    """{model: ("done", its result) | ("killed", the stage it was in)}: lines in order, a begun
    stage marks the model killed until its result line follows."""
    st = {}
    for o in objs:
        if o.get("type") == "result":
            st[o["model"]] = ("done", o)
        elif o.get("type") == "begin":
            st[o["model"]] = ("killed", o.get("stage"))
    return st


# ------------------------------------------------------------------------------- the table

def cell(text, n=110):
    """A markdown table cell: one line, no pipes, at most n characters."""
    s = " ".join(str(text).split()).replace("|", "/")
    return s if len(s) <= n else s[:n - 1] + "…"


def fmt_err(c):
    if not c:
        return "-"
    if "max_rel_err" not in c:
        return "ERR " + cell(c.get("error", "?"), 60)
    s = f"{c['max_rel_err']:.2g} {'✓' if c.get('ok') else '✗'}"
    nan = float("nan")
    if "kiln_vs_torch_f16" in c:  # f16 against the f32 truth, torch f16's own error beside
        s += f" (torch f16 {c.get('torch_f16_vs_f32') or nan:.2g}; kiln vs torch f16 {c['kiln_vs_torch_f16'] or nan:.2g})"
    elif "kiln_vs_f32" in c:  # a record of before run 100: f16 against torch f16
        s += f" (vs f32: kiln {c['kiln_vs_f32'] or nan:.2g}, torch {c.get('torch_f16_vs_f32') or nan:.2g})"
    return s


def fmt_ms(r):
    if not r:
        return "-"
    if "ms" in r:
        return f"{r['ms']:.3f}"
    if "skipped" in r:
        return "skipped"
    return "ERR " + cell(r.get("error", "?"), 40)


def short_error(msg):
    """kiln's / onnx2kiln's one line without the 'onnx2kiln: error: MODEL.onnx: ' prefix: the node
    and what is refused."""
    return re.sub(r"^(onnx2kiln|kiln)(: error)?: (\S+\.onnx: )?", "", msg.strip())


def import_cell(rec):
    s = rec.get("stages", {})
    for key, label in (("build", "build"), ("export", "export")):
        if key in s and not s[key].get("ok"):
            return f"✗ {label}: " + cell(s[key].get("error", "?"))
    for key in ("import_f32", "import_f16"):
        if key in s and not s[key].get("ok"):
            return "✗ " + cell(short_error(s[key].get("error", "?")), 200)
    if "import_f16" not in s and "import_f32" not in s:
        return "-"
    ex = s.get("export", {}).get("exporter")
    return "ok" + (f" ({ex} export)" if ex and ex != "legacy" else "")


def top1_cell(rec):
    if not rec.get("classify"):
        return "n/a"
    parts = []
    for d in ("f32", "f16"):
        c = rec.get("stages", {}).get(d, {})
        if "top1_agree" in c:
            parts.append(f"{d} {c['top1_agree']}/{c['images']}")
    return ", ".join(parts) or "-"


def accepted(rec):
    """Issue 20's acceptance for one model: imports, f32 <= 1e-4, f16 <= 1e-2, classifiers agree
    on every image's top-1 (f32)."""
    s = rec.get("stages", {})
    f32, f16 = s.get("f32", {}), s.get("f16", {})
    ok = bool(f32.get("ok") and f16.get("ok"))
    if rec.get("classify"):
        ok = ok and f32.get("top1_agree") == f32.get("images")
    return ok


def render_table(objs, order=None):
    """The markdown table of JSON-lines objects: one row per model and batch size."""
    states = model_states(objs)
    env = next((o for o in reversed(objs) if o.get("type") == "env"), {})
    rank = {n: i for i, n in enumerate(order or [e.name for e in ZOO])}
    names = sorted(states, key=lambda n: (rank.get(n, len(rank)), n))
    head = [f"Model zoo, f16 NHWC timing, {env.get('gpu', 'GPU ?')} (torch {env.get('torch', '?')}, "
            f"git {env.get('git', '?')}); errors: max |kiln - torch| / max |torch| (f32 target {F32_TARGET:g}, "
            f"TF32 off; f16 target {F16_TARGET:g}, against the same torch f32, with torch f16's own error and kiln vs torch f16 beside); times: medians in ms, L2 flushed; kiln = `kiln bench "
            f"--cuda-graph` (symbolic batch; bound: the graph with N bound, `--specialize`); compile = torch.compile(mode=reduce-overhead, freezing); kiln/compile > 1: kiln "
            f"faster.", "",
            "| model | N | import | f32 err | top-1 agree | f16 err | kiln ms | kiln bound ms | eager | eager+graph | "
            "compile | kiln/compile |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines, n_ok, n_all = list(head), 0, 0
    for name in names:
        state, rec = states[name]
        n_all += 1
        if state == "killed":
            lines.append(f"| {name} | - | ✗ killed during stage {rec} (no result: the run ended) | - | - | - | "
                         f"- | - | - | - | - | - |")
            continue
        n_ok += accepted(rec)
        s = rec.get("stages", {})
        first = [import_cell(rec), fmt_err(s.get("f32")), top1_cell(rec), fmt_err(s.get("f16"))]
        if rec.get("timed_out"):
            first[0] += f" (timed out: {cell(rec['timed_out'], 40)})"
        if rec.get("interrupted"):
            first[0] += " (interrupted)"
        timing = rec.get("timing", {}) or {"-": {}}
        for n in sorted(timing, key=lambda k: int(k) if k.isdigit() else 0):
            t = timing[n]
            k, c = t.get("kiln", {}).get("ms"), t.get("compile", {}).get("ms")
            ratio = f"**{c / k:.2f}×**" if k and c else "-"
            sp = t.get("kiln", {}).get("specialized_ms")
            lines.append(f"| {name} | {n} | " + " | ".join(first) + f" | {fmt_ms(t.get('kiln'))} | "
                         f"{'-' if sp is None else f'{sp:.3f}'} | {fmt_ms(t.get('eager'))} | {fmt_ms(t.get('eager_graph'))} | {fmt_ms(t.get('compile'))} | "
                         f"{ratio} |")
            first = ["", "", "", ""]
    lines += ["", f"{n_ok} of {n_all} models meet issue 20's acceptance (import, f32 ≤ {F32_TARGET:g}, "
                  f"f16 ≤ {F16_TARGET:g}, classifiers: f32 top-1 agrees on every image)."]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- main

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--list", action="store_true", help="print the selected models and exit")
    ap.add_argument("--table", nargs="+", metavar="FILE", help="render the markdown table of JSON-lines FILEs and exit")
    ap.add_argument("--markdown-out", metavar="FILE", help="with --table: also write the table to FILE")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all; see --list)")
    ap.add_argument("--families", default="", help="comma-separated families (e.g. resnet,vit,hf_bert)")
    ap.add_argument("--shard", default=None, metavar="I/N",
                    help="the I-th of N contiguous parts of the selection (one device call each)")
    ap.add_argument("--stages", default=",".join(STAGES),
                    help=f"comma-separated stages of {','.join(STAGES)} (default all; a stage brings the ones it "
                         f"needs: f32/f16/time need import, import needs export)")
    ap.add_argument("--skip-compile", action="store_true", help="no torch.compile in the time stage")
    ap.add_argument("--batches", default="32", help="comma-separated batch sizes of the time stage (default 32)")
    ap.add_argument("--out", default=None, help="JSON-lines file results are appended to (default $OUT/zoo.jsonl, "
                                                "else zoo.jsonl in a new temporary directory)")
    ap.add_argument("--resume", action="store_true", help="skip the models --out already has a result for, and "
                                                          "those a killed run was in the middle of")
    ap.add_argument("--retry-killed", action="store_true", help="with --resume: run the killed models again")
    ap.add_argument("--model-timeout", type=int, default=300, help="limit of one model, all stages (s)")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="soft limit of the whole run (s; 0: none): no model starts after it, and each model's "
                         "limit is cut to what is left of it")
    ap.add_argument("--timeout", type=int, default=240, help="limit of each kiln subprocess (s)")
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "kiln"), help="the kiln CLI (default build/kiln)")
    ap.add_argument("--work", default=None, help="scratch directory (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep each model's ONNX and graphs in --work")
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu",
                    help="where the f32 check runs: cpu compares kiln's CPU reference with torch f32 on "
                         "the CPU (no GPU needed; use a small --image-size / --seq and --check-images / "
                         "--check-samples); f16 and time need gpu")
    ap.add_argument("--reuse-exports", action="store_true",
                    help="with --work: a model whose ONNX file (WORK/MODEL/MODEL.onnx) is there is "
                         "not exported again")
    ap.add_argument("--image-size", type=int, default=224, help="classifier input size (inception_v3: 299)")
    ap.add_argument("--seg-size", type=int, default=384, help="segmentation input size (torchvision's eval: 520)")
    ap.add_argument("--seq", type=int, default=128, help="sequence length of the text models")
    ap.add_argument("--check-images", type=int, default=64, help="random images of the classifiers' checks")
    ap.add_argument("--check-samples", type=int, default=4, help="random inputs of the other models' checks")
    ap.add_argument("--check-chunk", type=int, default=32, help="rows per `kiln run` / torch call of a check")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--warmup-ms", type=float, default=50, help="do_bench warmup (ms)")
    ap.add_argument("--rep-ms", type=float, default=300, help="do_bench rep (ms)")
    ap.add_argument("--kiln-warmup", type=int, default=10, help="kiln bench --warmup")
    ap.add_argument("--kiln-iters", type=int, default=50, help="kiln bench --iters")
    ap.add_argument("--kiln-bench-args", default="", help="more arguments of every `kiln bench`")
    ap.add_argument("--no-specialize", action="store_true",
                    help="time only the generic (symbolic-batch) kernels, not also the graph with its "
                         "symbols bound (`kiln bench --specialize`, what EngineOptions::specialize_after runs)")
    args = ap.parse_args(argv)
    try:
        args.batch_list = [int(b) for b in args.batches.split(",") if b.strip()]
    except ValueError:
        ap.error(f"--batches: expected comma-separated positive integers, found '{args.batches}'")
    if not args.batch_list or min(args.batch_list) < 1:
        ap.error(f"--batches: expected comma-separated positive integers, found '{args.batches}'")
    if args.shard is not None:
        m = re.fullmatch(r"(\d+)/(\d+)", args.shard)
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            ap.error(f"--shard: expected I/N with 1 <= I <= N, found '{args.shard}'")
        args.shard = (int(m.group(1)), int(m.group(2)))
    stages = {s for s in args.stages.split(",") if s}
    if stages - set(STAGES):
        ap.error(f"--stages: unknown {', '.join(sorted(stages - set(STAGES)))} (stages: {', '.join(STAGES)})")
    if stages & {"f32", "f16", "time"}:
        stages.add("import")
    if "import" in stages:
        stages.add("export")
    args.stage_list = [s for s in STAGES if s in stages]
    if args.reuse_exports and not (args.work and args.keep):
        ap.error("--reuse-exports needs --work DIR and --keep (the exports it reuses live there)")
    for k in ("check_images", "check_samples", "check_chunk", "model_timeout", "timeout", "image_size", "seg_size",
              "seq"):
        if getattr(args, k) < 1:
            ap.error(f"--{k.replace('_', '-')} must be positive")
    return args


def environment(torch, kiln):
    import torchvision
    env = {"type": "env", "torch": torch.__version__, "torchvision": torchvision.__version__,
           "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    for mod in ("transformers", "triton", "onnx"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception as ex:  # noqa: BLE001 - a fact, not a requirement
            env[mod] = f"unavailable ({err_text(ex, 120)})"
    g, gout = run_cmd(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], 10)
    env["git"] = gout.strip() if g["ok"] else "unknown"
    v, vout = run_cmd([kiln, "--version"], 20)
    env["kiln_version"] = vout.strip() if v["ok"] else v.get("error")
    return env


def on_alarm(signum, frame):
    raise ModelTimeout(f"--model-timeout / --budget-s limit reached after {time.perf_counter() - on_alarm.t0:.0f} s")


def run_all(args, entries, log):
    import torch
    gpu_stages = [st for st in args.stage_list if st in (("f16", "time") if args.device == "cpu"
                                                         else ("f32", "f16", "time"))]
    if gpu_stages and args.device == "cpu":
        raise SystemExit(f"bench_zoo: --device cpu runs the f32 check only (kiln's CPU reference); "
                         f"the {', '.join(gpu_stages)} stage{'s' if len(gpu_stages) > 1 else ''} need a GPU")
    if gpu_stages and not torch.cuda.is_available():
        raise SystemExit(f"bench_zoo: torch sees no CUDA device (the {', '.join(gpu_stages)} "
                         f"stage{'s' if len(gpu_stages) > 1 else ''} need one; export and import "
                         f"run on the CPU: --stages export,import)")
    torch.backends.cudnn.benchmark = True
    kiln = os.path.abspath(args.kiln)
    env = environment(torch, kiln)
    env["args"] = {k: v for k, v in vars(args).items() if k not in ("table",)}
    log.write(env)
    print(json.dumps(env, default=str), flush=True)
    work = args.work or tempfile.mkdtemp(prefix="bench_zoo.")
    cache_dir = os.path.join(work, "kiln-cache")
    t_start = time.perf_counter()
    signal.signal(signal.SIGALRM, on_alarm)
    for e in entries:
        limit = args.model_timeout
        if args.budget_s:
            left = args.budget_s - (time.perf_counter() - t_start)
            if left < 20:
                print(f"[{e.name}] not started: --budget-s {args.budget_s} spent", flush=True)
                continue
            limit = min(limit, int(left))
        print(f"=== {e.name} ({e.family}), limit {limit} s", flush=True)
        on_alarm.t0 = time.perf_counter()
        signal.alarm(limit)
        try:
            run_model(torch, e, args, work, cache_dir, kiln, log)
        except ModelTimeout:  # fired between the stages' end and the disarm: the record is written
            pass
        finally:
            signal.alarm(0)


def main(argv=None):
    args = parse_args(argv)
    if args.table:
        text = render_table(read_jsonl(args.table))
        print(text)
        if args.markdown_out:
            with open(args.markdown_out, "w") as f:
                f.write(text + "\n")
        return 0
    entries = select(args)
    if args.list:
        print(list_text(entries, args))
        return 0
    needed = ("torch", "torchvision", "onnx", "numpy") + (("triton",) if "time" in args.stage_list else ())
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:  # the run's imports are inside its functions: say it once, here
        usage_exit(f"a run needs {', '.join(missing)} (and transformers for the hf_* models); "
                   f"--list, --table and --help do not")
    out = args.out or os.path.join(os.environ.get("OUT") or tempfile.mkdtemp(prefix="bench_zoo_out."), "zoo.jsonl")
    log = JsonLines(out)
    if args.resume and os.path.exists(out):
        states = model_states(read_jsonl([out]))
        skip = {n for n, (st, _) in states.items() if st == "done" or not args.retry_killed}
        if skip & {e.name for e in entries}:
            print(f"--resume: skipping {', '.join(e.name for e in entries if e.name in skip)}", flush=True)
        entries = [e for e in entries if e.name not in skip]
    # `timeout` sends SIGTERM: a SystemExit, so that the model in flight writes its partial record.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    code = 0
    try:
        run_all(args, entries, log)
    except (SystemExit, KeyboardInterrupt) as ex:
        print(f"interrupted ({ex.__class__.__name__} {getattr(ex, 'code', '')}): the results are partial", flush=True)
        code = 1
    if not os.path.exists(out):
        return code
    text = render_table(read_jsonl([out]))
    with open(out + ".md", "w") as f:
        f.write(text + "\n")
    print("\n" + text + f"\n\nwrote {out} and {out}.md", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
