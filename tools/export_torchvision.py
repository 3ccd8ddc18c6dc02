#!/usr/bin/env python3
"""Export reference models to ONNX for `kiln import` (run where torch/torchvision are installed).

    export_torchvision.py --out DIR [--models resnet50,encoder,unet_down] [--batch 2]
                          [--opset 17] [--seed 0]
    export_torchvision.py --compare EXPECTED.safetensors GOT.safetensors [--tol 1e-3]

Models (random weights, eval mode, a dynamic batch dim named N):
  resnet50   torchvision's ResNet-50 architecture, input x [N, 3, 224, 224]
  encoder    a ViT/BERT-style stack of 4 pre-LN transformer encoder blocks (768 wide, 12 heads,
             GELU MLP 3072), input x [N, 197, 768]
  unet_down  a UNet down block (2 ResBlocks with GroupNorm(32)+SiLU+3x3 conv, a 1x1 skip conv,
             then a stride-2 3x3 conv), input x [N, 128, 64, 64]

For each model it writes DIR/NAME.onnx, DIR/NAME.inputs.safetensors (the input `x`, batch
--batch) and DIR/NAME.expected.safetensors (torch's output `y` in f32 on those inputs), so that

    kiln import DIR/NAME.onnx --out DIR/kiln
    kiln run DIR/kiln/NAME.json --inputs DIR/NAME.inputs.safetensors --output DIR/NAME.got.safetensors
    export_torchvision.py --compare DIR/NAME.expected.safetensors DIR/NAME.got.safetensors

checks kiln against PyTorch. --compare needs only numpy; it prints the max relative error per
tensor (max |got - want| / max |want|) and exits 1 when one is above --tol.
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def compare(expected, got, tol):
    import numpy as np
    from onnx2kiln.safetensors import read_safetensors
    want, have = read_safetensors(expected), read_safetensors(got)
    worst = 0.0
    for name, w in sorted(want.items()):
        if name not in have:
            print(f"{name}: missing from {got} (has: {', '.join(sorted(have))})")
            return 1
        h = have[name]
        if h.shape != w.shape:
            print(f"{name}: shape {list(h.shape)} != expected {list(w.shape)}")
            return 1
        if np.isnan(h).any():
            print(f"{name}: NaN in {got}")
            return 1
        err = float(np.max(np.abs(h.astype(np.float64) - w)) / max(np.max(np.abs(w)), 1e-6))
        worst = max(worst, err)
        print(f"{name}: shape {list(w.shape)} max rel err {err:.3g}")
    print("ok" if worst <= tol else f"FAIL: {worst:.3g} > {tol}")
    return 0 if worst <= tol else 1


def build_models(names):
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads, self.hd = heads, dim // heads
            self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            b, s, d = x.shape  # exports as Shape/Gather chains (folded by onnx2kiln)
            q = self.q(x).reshape(b, s, self.heads, self.hd).transpose(1, 2)
            k = self.k(x).reshape(b, s, self.heads, self.hd).transpose(1, 2)
            v = self.v(x).reshape(b, s, self.heads, self.hd).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.hd), dim=-1)
            o = (att @ v).transpose(1, 2).reshape(b, s, d)
            return self.proj(o)

    class Block(nn.Module):
        def __init__(self, dim=768, heads=12, mlp=3072):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = Attention(dim, heads)
            self.fc1, self.fc2 = nn.Linear(dim, mlp), nn.Linear(mlp, dim)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Encoder(nn.Module):
        def __init__(self, depth=4):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(768)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.norm(x)

    class ResBlock(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            h = self.c1(F.silu(self.n1(x)))
            h = self.c2(F.silu(self.n2(h)))
            return self.skip(x) + h

    class DownBlock(nn.Module):
        def __init__(self, cin=128, cout=256):
            super().__init__()
            self.r1, self.r2 = ResBlock(cin, cout), ResBlock(cout, cout)
            self.down = nn.Conv2d(cout, cout, 3, stride=2, padding=1)

        def forward(self, x):
            return self.down(self.r2(self.r1(x)))

    out = {}
    for name in names:
        if name == "resnet50":
            import torchvision
            out[name] = (torchvision.models.resnet50(weights=None), (3, 224, 224))
        elif name == "encoder":
            out[name] = (Encoder(), (197, 768))
        elif name == "unet_down":
            out[name] = (DownBlock(), (128, 64, 64))
        else:
            raise SystemExit(f"export_torchvision: unknown model '{name}' "
                             f"(expected resnet50, encoder, unet_down)")
    return out


def export(args):
    import numpy as np
    import torch
    from onnx2kiln.safetensors import write_safetensors
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    names = [n for n in args.models.split(",") if n]
    for name, (m, shape) in build_models(names).items():
        m = m.eval()
        if name == "resnet50":
            # Random BatchNorm statistics, so that the BN math is exercised (and not identity).
            for mod in m.modules():
                if isinstance(mod, torch.nn.BatchNorm2d):
                    mod.running_mean.uniform_(-0.1, 0.1)
                    mod.running_var.uniform_(0.5, 1.5)
        x = torch.randn(args.batch, *shape)
        path = os.path.join(args.out, f"{name}.onnx")
        kw = dict(input_names=["x"], output_names=["y"], opset_version=args.opset,
                  dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, do_constant_folding=True)
        with torch.no_grad():
            y = m(x)
            try:
                torch.onnx.export(m, (x,), path, dynamo=False, **kw)
            except TypeError:  # torch < 2.5 has no `dynamo`
                torch.onnx.export(m, (x,), path, **kw)
        write_safetensors(os.path.join(args.out, f"{name}.inputs.safetensors"),
                          {"x": ("f32", x.numpy())})
        write_safetensors(os.path.join(args.out, f"{name}.expected.safetensors"),
                          {"y": ("f32", y.float().numpy())})
        n_params = sum(p.numel() for p in m.parameters())
        print(f"wrote {path} ({n_params / 1e6:.1f}M parameters, input x [N, "
              f"{', '.join(map(str, shape))}], batch {args.batch} reference)")
        try:
            import onnxruntime as ort
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            (yo,) = sess.run(None, {"x": x.numpy()})
            err = float(np.max(np.abs(yo - y.numpy())) / max(float(y.abs().max()), 1e-6))
            print(f"  onnxruntime vs torch: max rel err {err:.3g}")
        except ImportError:
            pass
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="output directory")
    p.add_argument("--models", default="resnet50,encoder,unet_down")
    p.add_argument("--batch", type=int, default=2, help="batch of the reference input/output")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compare", nargs=2, metavar=("EXPECTED", "GOT"))
    p.add_argument("--tol", type=float, default=1e-3)
    args = p.parse_args(argv)
    if args.compare:
        return compare(args.compare[0], args.compare[1], args.tol)
    if not args.out:
        p.error("--out DIR is required (or --compare)")
    return export(args)


if __name__ == "__main__":
    sys.exit(main())
