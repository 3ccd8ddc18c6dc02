"""Zoo models of bench/bench_zoo.py through torch.compile(backend="kiln") on the CPU at small
sizes (kiln's CPU reference against eager PyTorch f32, max |kiln - torch| / max |torch| within
1e-4): real architectures for the FX conversion (squeeze-excite, hardswish, stochastic depth off,
ceil-mode pools, channel shuffles, layer norms over permuted NHWC, attention with masks)."""
import os
import subprocess
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
    # the shifted-window mask's slice assignments (slice_scatter, copy) are kiln's too
    "swin_t": set(),
    # the attention mask's broadcast index (two index tensors: one gather at the flat index)
    "hf_bert_base": set(),
    "hf_gpt2": set(),
    # the nearest upsample's index tensors (folded constants) and its two-tensor index
    "unet_small": set(),
    # the 1-D stem convolutions (2-D ones over a unit height)
    "hf_whisper_base_encoder": set(),
    # the bilinear upsample's gathers and clamped weights (folded constants)
    "lraspp_mobilenet_v3_large": set(),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_on_the_cpu_reference(name, tmp_path):
    torch._dynamo.reset()
    kd.reset()
    kd.clear_reports()
    e = bz.BY_NAME[name]
    pytest.importorskip("transformers" if name.startswith("hf_") else "torchvision")
    args = bz.parse_args([])
    args.image_size, args.seg_size, args.seq = 64, 64, 16
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
    # Each kiln graph saved (weights beside it) and planned by the CLI: the Engine's passes and
    # the planner over what the GPU would build, with no GPU and no NVRTC.
    from conftest import KILN, KILN_ENV
    for i, g in enumerate(kd.kiln_graphs()):
        path = tmp_path / f"{name}_{i}.json"
        g.save(str(path))
        r = subprocess.run([KILN, "plan", str(path)], capture_output=True, text=True, env=KILN_ENV)
        assert r.returncode == 0, (path, r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("name", ["lraspp_mobilenet_v3_large", "googlenet"])
def test_zoo_f16_channels_last_graphs_plan(name, tmp_path):
    """The graphs the GPU gets: f16 channels-last, where the Engine pads the RGB stem and lays the
    filters out NHWC. Saved and planned by the CLI (the passes, no GPU or NVRTC): before febb12b
    the pad pass crashed on LR-ASPP's range nodes (the bilinear upsample's indices)."""
    torch._dynamo.reset()
    kd.reset()
    e = bz.BY_NAME[name]
    pytest.importorskip("torchvision")
    args = bz.parse_args([])
    args.image_size, args.seg_size = 64, 64
    m = bz.build_model(torch, e, 0).half().to(memory_format=torch.channels_last)
    xs = [x.half().contiguous(memory_format=torch.channels_last)
          for x in bz.make_inputs(torch, e, args, 1, torch.Generator().manual_seed(1))]
    with torch.no_grad():
        got = torch.compile(m, backend="kiln")(*xs)
    assert torch.isfinite(got).all()
    from conftest import KILN, KILN_ENV
    notes = ""
    for i, g in enumerate(kd.kiln_graphs()):
        path = tmp_path / f"{name}_{i}.json"
        g.save(str(path))
        r = subprocess.run([KILN, "plan", str(path)], capture_output=True, text=True, env=KILN_ENV)
        assert r.returncode == 0, (path, r.returncode, r.stderr[-2000:])
        notes += r.stdout
    assert "input channels zero-padded" in notes and "laid out NHWC as their inputs" in notes, notes[:3000]
