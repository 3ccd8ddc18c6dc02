#!/usr/bin/env python3
"""Writes the example graphs of examples/graphs/ (kiln graph files, version 1).

Weights are seeded random ("init"), scaled like a trained network's (He/Xavier std, batchnorm
variances near 1) so that activations stay O(1) through every block. Run from anywhere:
    python3 tools/make_examples.py
"""
import json
import math
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "graphs")


class G:
    def __init__(self, name):
        self.name = name
        self.inputs = {}
        self.constants = {}
        self.nodes = []
        self.outputs = []
        self.seed = 1

    def input(self, name, dtype, shape, layout=None):
        d = {"dtype": dtype, "shape": shape}
        if layout:
            d["layout"] = layout
        self.inputs[name] = d
        return name

    def normal(self, name, dtype, shape, std, mean=0.0, layout=None):
        d = {"dtype": dtype, "shape": shape,
             "init": {"normal": {"mean": mean, "std": round(std, 6)}, "seed": self.seed}}
        if layout:
            d["layout"] = layout
        self.seed += 1
        self.constants[name] = d
        return name

    def uniform(self, name, dtype, shape, low, high):
        self.constants[name] = {"dtype": dtype, "shape": shape,
                                "init": {"uniform": {"low": low, "high": high}, "seed": self.seed}}
        self.seed += 1
        return name

    def node(self, op, inputs, out, name=None, **attrs):
        n = {"op": op}
        if name:
            n["name"] = name
        n["inputs"] = inputs
        n["outputs"] = [out]
        n.update(attrs)
        self.nodes.append(n)
        return out

    def write(self, file):
        doc = {"kiln": 1, "name": self.name, "inputs": self.inputs, "constants": self.constants,
               "nodes": self.nodes, "outputs": self.outputs}
        path = os.path.join(OUT, file)
        with open(path, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print("wrote", os.path.relpath(path))


def conv_bn(g, x, prefix, cin, cout, k, dt, relu):
    pad = (k - 1) // 2
    w = g.normal(prefix + ".weight", dt, [cout, cin, k, k], math.sqrt(2.0 / (cin * k * k)),
                 layout="NHWC")
    c = g.node("conv2d", [x, w], prefix + "_out", name=prefix, stride=[1, 1], padding=[pad, pad])
    bn = prefix.replace("conv", "bn")
    scale = g.normal(bn + ".weight", dt, [cout], 0.1, mean=1.0)
    bias = g.normal(bn + ".bias", dt, [cout], 0.1)
    mean = g.normal(bn + ".running_mean", dt, [cout], 0.1)
    var = g.uniform(bn + ".running_var", dt, [cout], 0.5, 1.5)
    y = g.node("batchnorm", [c, scale, bias, mean, var], bn + "_out", name=bn, eps=1e-5)
    if relu:
        y = g.node("relu", [y], bn + "_relu", name=prefix.replace("conv", "relu"))
    return y


def resnet50_bottleneck():
    # torchvision resnet50 layer1 block 2/3 (identity shortcut): 256 -> 64 -> 64 -> 256.
    g = G("resnet50_bottleneck")
    dt = "f16"
    x = g.input("x", dt, ["N", 256, 56, 56], "NHWC")
    y = conv_bn(g, x, "conv1", 256, 64, 1, dt, True)
    y = conv_bn(g, y, "conv2", 64, 64, 3, dt, True)
    y = conv_bn(g, y, "conv3", 64, 256, 1, dt, False)
    y = g.node("add", [y, x], "residual", name="residual")
    g.node("relu", [y], "y", name="out_relu")
    g.outputs = ["y"]
    g.write("resnet50_bottleneck.json")


def transformer_mlp():
    # The MLP half of a BERT-base / GPT-2 small layer (post-norm): LN(x + W2 gelu(W1 x + b1) + b2).
    g = G("transformer_mlp")
    dt = "bf16"
    d, h = 768, 3072
    x = g.input("x", dt, ["seq", d])
    w1 = g.normal("fc1.weight", dt, [d, h], math.sqrt(1.0 / d))
    b1 = g.normal("fc1.bias", dt, [h], 0.02)
    w2 = g.normal("fc2.weight", dt, [h, d], math.sqrt(1.0 / h))
    b2 = g.normal("fc2.bias", dt, [d], 0.02)
    ln_w = g.normal("ln.weight", dt, [d], 0.05, mean=1.0)
    ln_b = g.normal("ln.bias", dt, [d], 0.02)
    y = g.node("matmul", [x, w1, b1], "fc1_out", name="fc1")
    y = g.node("gelu", [y], "gelu_out", name="gelu", approximate="tanh")
    y = g.node("matmul", [y, w2, b2], "fc2_out", name="fc2")
    y = g.node("add", [y, x], "residual", name="residual")
    g.node("layernorm", [y, ln_w, ln_b], "y", name="ln", axis=-1, eps=1e-5)
    g.outputs = ["y"]
    g.write("transformer_mlp.json")


def unet_resblock():
    # Stable Diffusion UNet ResnetBlock2D at 320 channels (without the time embedding):
    # x + conv2(silu(gn2(conv1(silu(gn1(x)))))).
    g = G("unet_resblock")
    dt = "f16"
    c = 320
    x = g.input("x", dt, ["N", c, 32, 32], "NHWC")
    y = x
    for i in (1, 2):
        gw = g.normal(f"norm{i}.weight", dt, [c], 0.05, mean=1.0)
        gb = g.normal(f"norm{i}.bias", dt, [c], 0.02)
        y = g.node("groupnorm", [y, gw, gb], f"norm{i}_out", name=f"norm{i}", groups=32, eps=1e-5)
        y = g.node("silu", [y], f"silu{i}_out", name=f"silu{i}")
        w = g.normal(f"conv{i}.weight", dt, [c, c, 3, 3], math.sqrt(1.0 / (c * 9)), layout="NHWC")
        b = g.normal(f"conv{i}.bias", dt, [c], 0.02)
        y = g.node("conv2d", [y, w, b], f"conv{i}_out", name=f"conv{i}", stride=[1, 1],
                   padding=[1, 1])
    g.node("add", [x, y], "y", name="residual")
    g.outputs = ["y"]
    g.write("unet_resblock.json")


def add_layernorm_gelu():
    # Memory-bound: a residual add, layernorm and gelu over [rows, 4096]: one fused kernel on the
    # GPU (read x and r once, write y once) against three or more unfused.
    g = G("add_layernorm_gelu")
    dt = "f16"
    d = 4096
    x = g.input("x", dt, ["rows", d])
    r = g.input("r", dt, ["rows", d])
    w = g.normal("ln.weight", dt, [d], 0.05, mean=1.0)
    b = g.normal("ln.bias", dt, [d], 0.02)
    y = g.node("add", [x, r], "sum", name="residual")
    y = g.node("layernorm", [y, w, b], "ln_out", name="ln", axis=-1, eps=1e-5)
    g.node("gelu", [y], "y", name="gelu", approximate="none")
    g.outputs = ["y"]
    g.write("add_layernorm_gelu.json")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    resnet50_bottleneck()
    transformer_mlp()
    unet_resblock()
    add_layernorm_gelu()
