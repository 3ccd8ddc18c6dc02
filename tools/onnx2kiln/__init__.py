"""onnx2kiln: convert an ONNX model to a kiln graph file (format version 1) plus its weights.

    python3 -m onnx2kiln MODEL.onnx --out DIR [--name NAME] [--layout NCHW|NHWC]
                         [--dtype f32|f16|bf16] [--force] [--kiln PATH]

(with tools/ on sys.path; `kiln import` runs the same) writes DIR/NAME.json (the graph) and
DIR/NAME.safetensors (every initializer and large constant that the graph uses, logical row-major
shapes, little endian). Shape-only subgraphs (Shape/Gather/Unsqueeze/Concat/... chains that
compute static or symbolic shapes) are folded at conversion time; dynamic ONNX dims become kiln
symbols. See docs/ONNX.md for the op coverage.

The package, in the order a conversion uses it:

    cli.py          the command line, the one-line errors, the summary
    stamp.py        the up-to-date stamp (skips a conversion DIR already holds)
    model.py        reading the model and refusing what cannot be converted, before conversion
    convert.py      the driver: inputs, node by node, outputs, pruning
    context.py      the Converter: conversion state and the helpers converters use
    registry.py     @converter / @fusion / @folder: what is done with each ONNX op type
    fold.py         constant folding (shape computations) at conversion time
    fusions.py      exporter idioms that become one kiln node (gelu, groupnorm, silu, linear)
    ops/            the op converters, one module per op family
    shapes.py       shape arithmetic needed during conversion
    names.py        sanitized, unique kiln names
    writer.py       writing NAME.json and NAME.safetensors, atomically
    kiln_check.py   the final check of the written graph by `kiln check --json`
    safetensors.py  the safetensors reader/writer (also used by tests, bench and export scripts)

Importing the package imports nothing heavy: numpy and onnx load with the modules that need them.
"""
