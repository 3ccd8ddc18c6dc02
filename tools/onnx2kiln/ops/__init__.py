"""Op converters, one module per op family. Each registers its ONNX op types with @converter
(registry.py); importing this package registers them all.

    conv_pool.py    Conv (1-D, 2-D), MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, Pad
    matmul.py       MatMul, Gemm
    norms.py        BatchNormalization, LayerNormalization, InstanceNormalization,
                    GroupNormalization
    elementwise.py  unary and binary math, activations (Relu ... Gelu, LeakyRelu, Elu, HardSigmoid,
                    PRelu), Clip, Cast
    movement.py     Reshape, Flatten, Transpose, Identity, Dropout
    gather.py       Gather, GatherElements (with a run-time operand; constants fold)
    reduce.py       ReduceMean/Sum/Max/Min/L2/Prod, Softmax, LogSoftmax, CumSum
"""
from . import conv_pool, elementwise, gather, matmul, movement, norms, reduce  # noqa: F401
