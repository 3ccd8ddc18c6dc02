#!/usr/bin/env python3
"""Writes the hostile-input regression corpus (issue 24) for the fuzz targets:

  tests/fuzz/corpus/graph_loader/hostile_*.json   graph files (fuzz_graph_loader)
  tests/fuzz/corpus/safetensors/hostile_*.bin      safetensors headers (fuzz_safetensors: byte 0
                                                   is the data size in units of 16 bytes, then
                                                   the header text)

One file per row of the issue's table that is an input file, small enough for the fuzzers'
max_len: deep nesting (row 1), many objects, a long chain and a large header (row 3, scaled
down), a huge random constant (row 4), sizes that would wrap (row 10), a NUL and junk after the
value (row 11), and duplicate keys. Every one must be refused with a user error or load within the
fuzzers' limits. Run from anywhere: python3 tests/fuzz/make_corpus.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
GRAPHS = os.path.join(HERE, "corpus", "graph_loader")
HEADERS = os.path.join(HERE, "corpus", "safetensors")

SMALL = {"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": ["N", 8]}},
         "nodes": [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]}


def graph(name, text):
    with open(os.path.join(GRAPHS, "hostile_" + name + ".json"), "wb") as f:
        f.write(text.encode() if isinstance(text, str) else text)


def header(name, text, data_units=1):
    with open(os.path.join(HEADERS, "hostile_" + name + ".bin"), "wb") as f:
        f.write(bytes([data_units]) + (text.encode() if isinstance(text, str) else text))


def chain(n):
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append({"op": "relu", "inputs": [prev], "outputs": ["t%d" % i]})
        prev = "t%d" % i
    return {"kiln": 1, "inputs": {"x": {"dtype": "f16", "shape": ["N", 64]}}, "nodes": nodes,
            "outputs": [prev]}


def main():
    os.makedirs(GRAPHS, exist_ok=True)
    os.makedirs(HEADERS, exist_ok=True)
    small = json.dumps(SMALL)
    # row 1: nesting far past the limit, and exactly at it
    graph("deep_100000", '{"kiln": 1, "doc": ' + "[" * 100000 + "]" * 100000 + ', "outputs": ["y"]}')
    graph("deep_255", small[:-1] + ', "doc": ' + "[" * 255 + "]" * 255 + "}")
    graph("deep_object", small[:-1] + ', "metadata": ' + '{"a": ' * 300 + "1" + "}" * 300 + "}")
    # row 3, scaled to the fuzzer's max_len
    meta = {"k%d" % i: {"a": i} for i in range(5000)}
    graph("many_objects", json.dumps(dict(SMALL, metadata=meta)))
    graph("chain_2000", json.dumps(chain(2000)))
    # row 4: a 2^30-element random constant (the fuzzer's constant limit refuses it)
    graph("huge_init", '{"kiln":1,"constants":{"w":{"dtype":"f16","shape":[1073741824],'
                       '"init":{"normal":{}}}},"outputs":["w"]}')
    graph("init_at_limit", '{"kiln":1,"constants":{"w":{"dtype":"bf16","shape":[256, 256],'
                           '"init":{"uniform":{"low": -1, "high": 1}, "seed": 3}}},"outputs":["w"]}')
    # row 10: static sizes whose products would wrap
    graph("wrapping_sizes", '{"kiln":1,"inputs":{"x":{"dtype":"f32","shape":'
                            '[2147483647, 2147483647, 2147483647]}},"outputs":["x"]}')
    # row 11: NUL and junk after the value; junk without a NUL
    graph("nul_junk", small.encode() + b"\0junk")
    graph("trailing_junk", small + " ]")
    graph("duplicate_key", small[:-1] + ', "outputs": ["y"]}')

    entry = '"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'
    header("deep_100000", '{"__metadata__": ' + "[" * 100000 + "]" * 100000 + "}")
    header("deep_shape", '{"w": {"dtype": "F32", "shape": ' + "[" * 300 + "]" * 300 +
           ', "data_offsets": [0, 4]}}')
    header("many_entries", "{" + ", ".join(
        '"t%d": {"dtype": "F32", "shape": [1], "data_offsets": [%d, %d]}' % (i, 4 * i, 4 * i + 4)
        for i in range(1000)) + "}", data_units=250)
    header("many_metadata", '{"__metadata__": {' + ", ".join(
        '"m%d": "v"' % i for i in range(5000)) + "}, " + entry + "}")
    header("nul_junk", ("{" + entry + "}").encode() + b"\0junk")
    header("trailing_junk", "{" + entry + "} xx")
    header("space_padding", "{" + entry + "}       ")
    header("duplicate_key", "{" + entry + ", " + entry + "}")
    header("huge_shape", '{"w": {"dtype": "F16", "shape": [4611686018427387904, 4], '
                         '"data_offsets": [0, 4]}}')
    header("overlap", '{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, '
                      '"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}')
    header("good", '{"__metadata__": {"format": "pt"}, "a": {"dtype": "BF16", "shape": [2, 2], '
                   '"data_offsets": [0, 8]}, "b": {"dtype": "I64", "shape": [1], '
                   '"data_offsets": [8, 16]}}')


if __name__ == "__main__":
    main()
