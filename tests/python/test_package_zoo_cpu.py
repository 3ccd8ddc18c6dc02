"""Zoo models of bench/bench_zoo.py through torch.compile(backend="kiln") on the CPU at small
sizes (kiln's CPU reference against eager PyTorch f32, max |kiln - torch| / max |torch| within
1e-4): real architectures for the FX conversion (squeeze-excite, hardswish, stochastic depth off,
ceil-mode pools, channel shuffles, layer norms over permuted NHWC, attention with masks)."""
import os
import sys

import pytest
import torch

import kiln.dynamo as kd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_zoo as bz  # noqa: E402

# model -> the ops known to stay eager (the partition report's targets)
MODELS = {
    "mobilenet_v3_large": set(),
    "convnext_tiny": set(),
    "googlenet": set(),
    "shufflenet_v2_x1_0": set(),
    # the attention mask's broadcast index (two index tensors)
    "hf_bert_base": {"aten.index.Tensor"},
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_on_the_cpu_reference(name):
    torch._dynamo.reset()
    kd.reset()
    kd.clear_reports()
    e = bz.BY_NAME[name]
    pytest.importorskip("transformers" if name.startswith("hf_") else "torchvision")
    args = bz.parse_args([])
    args.image_size, args.seq = 64, 16
    m = bz.build_model(torch, e, 0)
    xs = bz.make_inputs(torch, e, args, 2, torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = m(*xs)
        got = torch.compile(m, backend="kiln")(*xs)
    assert not torch.isnan(got).any()
    err = ((got - want).abs().max() / want.abs().max()).item()
    off = {n["target"] for r in kd.partition_report() for n in r["nodes"] if n["where"] == "eager"}
    assert off <= MODELS[name] | {"<built-in function getitem>"}, kd.format_report()
    assert kd.stats()["reference_runs"] >= 1
    assert err <= bz.F32_TARGET, err
