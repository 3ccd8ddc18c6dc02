"""Op converters, one module per op family. Each registers its ONNX op types with @converter
(registry.py); importing this package registers them all.

    conv_pool.py    Conv (1-D, 2-D), MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, Pad
    matmul.py       MatMul, Gemm
    norms.py        BatchNormalization, LayerNormalization, InstanceNormalization,
                    GroupNormalization
    elementwise.py  unary and binary math, activations (Relu ... Gelu, LeakyRelu, Elu, HardSigmoid,
                    PRelu), Clip, Cast
    movement.py     Reshape, Flatten, Transpose, Identity, Dropout
    reduce.py       ReduceMean/Sum/Max/Min/L2/Prod, ArgMax/ArgMin, Softmax, LogSoftmax, CumSum
    resize.py       Resize, Upsample
    einsum.py       Einsum (transposes, reshapes, reduce_sums and matmuls)
    index.py        Range with a run-time limit (a constant Range folds)
    gather.py       Gather, GatherElements (with a run-time operand; constants fold)
    gathernd.py     GatherND (linear index arithmetic and a kiln gather)
    (conv_pool.py also: ConvTranspose)
"""
from . import (conv_pool, einsum, elementwise, gather, gathernd, index, matmul,  # noqa: F401
               movement, norms, reduce, resize)
