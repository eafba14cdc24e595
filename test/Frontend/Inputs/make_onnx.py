"""Writes small ONNX models for the importer's lit tests (onnx.helper only).

    %python make_onnx.py <case> <output.onnx>

Weights are deterministic (arange-based) so tests can check values.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def init(name, shape, scale=0.01, dtype=np.float32):
    n = int(np.prod(shape)) if shape else 1
    data = (np.arange(n, dtype=np.float64) * scale).astype(dtype).reshape(shape)
    return numpy_helper.from_array(data, name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="cnnc-test")
    m.ir_version = 7
    return m


def conv_bias():
    # Conv with bias, SAME_UPPER in the second conv, group conv in the third.
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1",
                         pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv_same",
                         auto_pad="SAME_UPPER", strides=[2, 2],
                         kernel_shape=[3, 3]),
        helper.make_node("Conv", ["c2", "w3", "b3"], ["y"], name="conv_group",
                         group=4, pads=[0, 0, 0, 0]),
    ]
    return model(nodes, [vi("x", [2, 3, 8, 8])], [vi("y", None)],
                 [init("w1", [8, 3, 3, 3]), init("b1", [8]),
                  init("w2", [8, 8, 3, 3]), init("w3", [8, 2, 1, 1]),
                  init("b3", [8])])


def gemm():
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], name="flat", axis=1),
        helper.make_node("Gemm", ["f", "w", "b"], ["g"], name="fc", transB=1),
        helper.make_node("Relu", ["g"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["m"], name="mm"),
        helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1),
    ]
    return model(nodes, [vi("x", [4, 2, 3, 2])], [vi("y", None)],
                 [init("w", [5, 12]), init("b", [5]), init("w2", [5, 3])])


def fixed_batch_view():
    """x.view(x.size(0), -1) traced at batch 1 by the legacy exporter: a
    Reshape to the constant [1, -1] ahead of the classifier; a second
    Reshape to [1, 2, 3] whose input does not lead with the batch."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="view"),
        helper.make_node("Gemm", ["f", "w", "b"], ["y"], name="fc", transB=1),
        helper.make_node("Reshape", ["c", "shape2"], ["c2"], name="const_view"),
    ]
    return model(nodes, [vi("x", [1, 2, 3, 2])], [vi("y", None)],
                 [init("w", [5, 12]), init("b", [5]), ints("shape", [1, -1]),
                  init("c", [6]), ints("shape2", [1, 2, 3])])


def fixed_batch_mask():
    """A per-sample mask made at export time with the exported batch 2
    (StochasticDepth's ones[N, 1]): it cannot follow --batch."""
    nodes = [helper.make_node("Mul", ["x", "mask"], ["y"], name="row_mask")]
    return model(nodes, [vi("x", [2, 3])], [vi("y", None)],
                 [init("mask", [2, 1], 1.0)])


def gemm_alpha():
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", alpha=2.0)]
    return model(nodes, [vi("x", [4, 3])], [vi("y", None)],
                 [init("w", [3, 5])])


def batchnorm():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("BatchNormalization",
                         ["c", "scale", "bias", "mean", "var"], ["y"],
                         name="bn", epsilon=1e-3),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)],
                 [init("w", [4, 3, 1, 1]), init("scale", [4]),
                  init("bias", [4]), init("mean", [4]),
                  init("var", [4], scale=1.0)])


def batchnorm_training():
    # torch.onnx.export(training=TRAINING), opset 14: training_mode=1 and
    # running statistics outputs; weights also listed as graph inputs.
    nodes = [
        helper.make_node("BatchNormalization",
                         ["x", "bn.weight", "bn.bias", "bn.running_mean",
                          "bn.running_var"],
                         ["y", "bn.new_mean", "bn.new_var"], name="bn_train",
                         epsilon=1e-5, momentum=0.9, training_mode=1),
    ]
    inits = [init("bn.weight", [3]), init("bn.bias", [3]),
             init("bn.running_mean", [3]),
             init("bn.running_var", [3], scale=1.0)]
    inputs = [vi("x", [2, 3, 4, 4])] + [vi(t.name, list(t.dims))
                                        for t in inits]
    return model(nodes, inputs,
                 [vi("y", None), vi("bn.new_mean", None),
                  vi("bn.new_var", None)], inits, opset=14)


def pools():
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p1"], name="maxpool",
                         kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["p1"], ["p2"], name="avgpool",
                         kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
                         count_include_pad=1),
        helper.make_node("AveragePool", ["p2"], ["p3"], name="avgpool_excl",
                         kernel_shape=[3, 3], strides=[1, 1],
                         pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["p3"], ["y"], name="gap"),
    ]
    return model(nodes, [vi("x", [1, 2, 9, 9])], [vi("y", None)])


def concat():
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="squeeze"),
        helper.make_node("Conv", ["a", "w2"], ["b"], name="expand1x1"),
        helper.make_node("Conv", ["a", "w3"], ["c"], name="expand3x3",
                         pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["b", "c"], ["y"], name="cat", axis=1),
    ]
    return model(nodes, [vi("x", [1, 4, 5, 5])], [vi("y", None)],
                 [init("w1", [2, 4, 1, 1]), init("w2", [3, 2, 1, 1]),
                  init("w3", [5, 2, 3, 3])])


def reshape_chain():
    # x.view(x.size(0), -1) as torch 1.13 exports it without constant folding.
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Constant", [], ["zero"], name="const0",
                         value=helper.make_tensor("v", TensorProto.INT64, [],
                                                  [0])),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather",
                         axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"],
                         name="unsqueeze"),
        helper.make_node("Constant", [], ["minus1"], name="const1",
                         value=helper.make_tensor("v", TensorProto.INT64, [1],
                                                  [-1])),
        helper.make_node("Concat", ["n1", "minus1"], ["newshape"],
                         name="concat_shape", axis=0),
        helper.make_node("Cast", ["newshape"], ["newshape64"], name="cast",
                         to=TensorProto.INT64),
        helper.make_node("Slice", ["newshape64", "st", "en"], ["sliced"],
                         name="slice"),
        helper.make_node("Reshape", ["r", "sliced"], ["flat"],
                         name="view"),
        helper.make_node("Reshape", ["flat", "zero_shape"], ["y"],
                         name="reshape_zero"),
    ]
    return model(nodes, [vi("x", [3, 2, 4, 4])], [vi("y", None)],
                 [ints("axes0", [0]), ints("st", [0]), ints("en", [100]),
                  ints("zero_shape", [0, 4, -1])])


def misc():
    # Clip (ReLU6) from constant inputs, Dropout in training form, Identity,
    # Add/Mul with a broadcast constant, Transpose.
    nodes = [
        helper.make_node("Clip", ["x", "lo", "hi6"], ["c"], name="relu6"),
        helper.make_node("Dropout", ["c", "ratio", "train"], ["d", "mask"],
                         name="drop"),
        helper.make_node("Identity", ["d"], ["i"], name="ident"),
        helper.make_node("Mul", ["i", "two"], ["m"], name="scale"),
        helper.make_node("Add", ["m", "rowbias"], ["a"], name="addrow"),
        helper.make_node("Mul", ["a", "i"], ["mm"], name="mul"),
        helper.make_node("Transpose", ["mm"], ["y"], name="tr",
                         perm=[0, 2, 3, 1]),
    ]
    return model(nodes, [vi("x", [1, 2, 2, 3])], [vi("y", None)],
                 [init("lo", [], 0.0), init("hi", [], 0.0),
                  numpy_helper.from_array(np.array(6.0, np.float32), "hi6"),
                  numpy_helper.from_array(np.array(0.25, np.float32),
                                          "ratio"),
                  numpy_helper.from_array(np.array(True), "train"),
                  numpy_helper.from_array(np.array(2.0, np.float32), "two"),
                  init("rowbias", [1, 3], 1.0)], opset=13)


def clip_attr():
    nodes = [helper.make_node("Clip", ["x"], ["y"], name="clip6", min=0.0,
                              max=6.0)]
    return model(nodes, [vi("x", [1, 4])], [vi("y", None)], opset=6)


def unsupported():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("LpNormalization", ["r"], ["y"], name="lpnorm_1"),
    ]
    return model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None)])


def unnamed():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Hardmax", ["r"], ["y"])]
    return model(nodes, [vi("x", [1, 3])], [vi("y", None)])


def dynamic_batch():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Flatten", ["c"], ["y"], name="flatten"),
    ]
    return model(nodes, [vi("x", ["batch", 3, 4, 4])], [vi("y", None)],
                 [init("w", [2, 3, 3, 3])])


def bad_shapes():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv_bad")]
    return model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None)],
                 [init("w", [2, 5, 3, 3])])


def huge_input():
    """A declared input of 12 x 2^62 elements (found by the structured ONNX
    fuzzer: shape arithmetic overflowed int64)."""
    nodes = [helper.make_node("Flatten", ["x"], ["y"], name="flat", axis=1)]
    return model(nodes, [vi("x", [4, 3, 2**62])], [vi("y", None)])


def redefined():
    """A node that writes the name of its own input (not SSA; found by the
    structured ONNX fuzzer: the Split lost its input mid-import and failed
    without a diagnostic)."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"),
             helper.make_node("Split", ["y"], ["y", "z"], name="split_in_place", axis=1)]
    return model(nodes, [vi("x", [1, 4, 2, 2])], [vi("y", None)])


def bad_add():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Add", ["c", "x"], ["y"], name="residual_bad"),
    ]
    return model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None)],
                 [init("w", [2, 3, 1, 1])])


def fp16_weights():
    w = numpy_helper.from_array(
        (np.arange(6, dtype=np.float32) * 0.5).astype(np.float16).reshape(
            [2, 3]), "w")
    w64 = numpy_helper.from_array(np.arange(3, dtype=np.float64), "b")
    # float_data instead of raw_data for a third initializer.
    w3 = helper.make_tensor("w3", F, [3, 2], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="fc"),
             helper.make_node("MatMul", ["g", "w3"], ["y"], name="mm")]
    return model(nodes, [vi("x", [1, 2])], [vi("y", None)], [w, w64, w3])


def gemm_beta():
    # alpha/beta, a [M, 1] column bias (expanded), a batched MatMul
    # (3-D x 2-D) and a 1-D rhs.
    nodes = [
        helper.make_node("Gemm", ["x", "w", "col"], ["g"], name="fc",
                         alpha=2.0, beta=0.5),
        helper.make_node("Gemm", ["g", "w2", "b2"], ["g2"], name="fc2",
                         beta=3.0, transB=1),
        helper.make_node("Reshape", ["g2", "shape3"], ["r"], name="to3d"),
        helper.make_node("MatMul", ["r", "w3"], ["m"], name="bmm"),
        helper.make_node("MatMul", ["m", "v"], ["y"], name="mv"),
    ]
    return model(nodes, [vi("x", [4, 3])], [vi("y", None)],
                 [init("w", [3, 5]), init("col", [4, 1]), init("w2", [6, 5]),
                  init("b2", [6]), ints("shape3", [2, 2, 6]),
                  init("w3", [6, 3]), init("v", [3])])


def unsupported_many():
    # Three unsupported op types, one of them twice, one in another domain.
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("LpNormalization", ["r"], ["l1"], name="lpnorm_1"),
        helper.make_node("Relu", ["l1"], ["r2"], name="relu2"),
        helper.make_node("LpNormalization", ["r2"], ["l2"], name="lpnorm_2"),
        helper.make_node("Hardmax", ["l2"], ["h"]),
        helper.make_node("MyOp", ["h"], ["y"], name="custom",
                         domain="com.example"),
    ]
    m = model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None)])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    return m


def bn_inference():
    # What cnnc sees from an inference export with BatchNorm kept (other
    # exporters, PyTorch 2.x eval): BN with one output, Dropout without mask.
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("BatchNormalization",
                         ["c", "scale", "bias", "mean", "var"], ["b"],
                         name="bn"),
        helper.make_node("Relu", ["b"], ["r"], name="relu"),
        helper.make_node("Dropout", ["r"], ["d"], name="drop"),
        helper.make_node("GlobalAveragePool", ["d"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["y"], name="flat"),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)],
                 [init("w", [4, 3, 1, 1]), init("scale", [4]),
                  init("bias", [4]), init("mean", [4]),
                  init("var", [4], scale=1.0)], opset=14)


def bn_training_dropout():
    # Training export: BN training_mode=1, Dropout with a training_mode
    # input and a mask output.
    nodes = [
        helper.make_node("BatchNormalization",
                         ["x", "bn.weight", "bn.bias", "bn.running_mean",
                          "bn.running_var"],
                         ["b", "bn.new_mean", "bn.new_var"], name="bn_train",
                         epsilon=1e-5, momentum=0.9, training_mode=1),
        helper.make_node("Dropout", ["b", "ratio", "train"], ["d", "mask"],
                         name="drop"),
        helper.make_node("GlobalAveragePool", ["d"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["y"], name="flat"),
    ]
    inits = [init("bn.weight", [3]), init("bn.bias", [3]),
             init("bn.running_mean", [3]),
             init("bn.running_var", [3], scale=1.0),
             numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "train")]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)], inits,
                 opset=14)


def zero_dim():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return model(nodes, [vi("x", [2, 0, 4])], [vi("y", None)])


def unary_ops():
    # The elementwise ops of the contract, opset 14 (HardSwish).
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["a"], name="sigmoid"),
        helper.make_node("Tanh", ["a"], ["b"], name="tanh"),
        helper.make_node("Erf", ["b"], ["c"], name="erf"),
        helper.make_node("Exp", ["c"], ["d"], name="exp"),
        helper.make_node("Sqrt", ["d"], ["e"], name="sqrt"),
        helper.make_node("Neg", ["e"], ["f"], name="neg"),
        helper.make_node("Reciprocal", ["f"], ["g"], name="recip"),
        helper.make_node("HardSigmoid", ["g"], ["h"], name="hsig",
                         alpha=0.25),
        helper.make_node("HardSwish", ["h"], ["i"], name="hswish"),
        helper.make_node("LeakyRelu", ["i"], ["j"], name="lrelu"),
        helper.make_node("Pow", ["j", "three"], ["k"], name="pow"),
        helper.make_node("Sub", ["k", "x"], ["l"], name="sub"),
        helper.make_node("Div", ["l", "row"], ["y"], name="div"),
    ]
    return model(nodes, [vi("x", [2, 3])], [vi("y", None)],
                 [numpy_helper.from_array(np.array(3.0, np.float32), "three"),
                  init("row", [3], 1.0)], opset=14)


def large_swish():
    """EfficientNet's first SiLU at batch 64, 224x224 (x * sigmoid(x), both
    [64, 32, 112, 112] = 25.7M elements): runtime tensors above the
    constant-folding limit (2^24) must broadcast."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
             helper.make_node("Mul", ["x", "s"], ["y"], name="swish")]
    return model(nodes, [vi("x", [64, 32, 112, 112])], [vi("y", None)])


def gelu():
    nodes = [helper.make_node("Gelu", ["x"], ["g"], name="gelu"),
             helper.make_node("Gelu", ["g"], ["y"], name="gelu_tanh",
                              approximate="tanh")]
    return model(nodes, [vi("x", [2, 3])], [vi("y", None)], opset=20)


def reduce_ops(opset=13):
    # ReduceSum axes: input from opset 13; ReduceMean: attribute before 18.
    if opset >= 18:
        mean = helper.make_node("ReduceMean", ["x", "axes23"], ["m"],
                                name="mean")
    else:
        mean = helper.make_node("ReduceMean", ["x"], ["m"], name="mean",
                                axes=[2, 3])
    nodes = [
        mean,
        helper.make_node("ReduceSum", ["m", "axes1"], ["s"], name="sum",
                         keepdims=0),
        helper.make_node("ReduceMean", ["s"], ["y"], name="mean_all"),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 5])], [vi("y", None)],
                 [ints("axes23", [-2, -1]), ints("axes1", [1])], opset=opset)


def reduce_ops18():
    return reduce_ops(18)


def layernorm():
    nodes = [helper.make_node("LayerNormalization", ["x", "ln.weight",
                                                     "ln.bias"], ["y"],
                              name="ln", axis=-1, epsilon=1e-5)]
    return model(nodes, [vi("x", [2, 3, 4])], [vi("y", None)],
                 [init("ln.weight", [4], 1.0), init("ln.bias", [4])],
                 opset=17)


def split(opset=13):
    if opset >= 18:
        nodes = [helper.make_node("Split", ["x"], ["a", "b", "c"],
                                  name="split", axis=1, num_outputs=3)]
    else:
        nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"],
                                  name="split", axis=1)]
    nodes.append(helper.make_node("Concat", ["c", "a"], ["y"], name="cat",
                                  axis=1))
    return model(nodes, [vi("x", [2, 7, 3])], [vi("y", None)],
                 [ints("sizes", [2, 2, 3])] if opset < 18 else [],
                 opset=opset)


def split18():
    return split(18)


def conv_transpose():
    # 2-D with groups, strides, output_shape (end pads negative: the extra
    # row is output padding) and a bias; then 1-D with output_padding.
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"],
                         name="deconv", group=2, strides=[3, 2],
                         output_shape=[10, 8]),
        helper.make_node("Reshape", ["c", "flat"], ["r"], name="to1d"),
        helper.make_node("ConvTranspose", ["r", "w1"], ["y"],
                         name="deconv1d", strides=[2], pads=[1, 0],
                         output_padding=[1]),
    ]
    return model(nodes, [vi("x", [1, 4, 3, 3])], [vi("y", None)],
                 [init("w", [4, 1, 3, 3]), init("b", [2]),
                  ints("flat", [1, 2, 80]), init("w1", [2, 3, 2])])


def pow_reduce_max():
    # Pow with a tensor exponent (integer, broadcast), Abs and ReduceMax
    # (keepdims=0).
    nodes = [
        helper.make_node("Pow", ["x", "e"], ["p"], name="pow"),
        helper.make_node("Abs", ["p"], ["a"], name="abs"),
        helper.make_node("ReduceMax", ["a"], ["y"], name="max", axes=[-1],
                         keepdims=0),
    ]
    return model(nodes, [vi("x", [2, 3])], [vi("y", None)],
                 [ints("e", [1, 2, 3])])


def pools1d():
    # 1-D pooling runs as 1 x k; pads may exceed half the kernel.
    nodes = [
        helper.make_node("MaxPool", ["x"], ["m"], name="max1d",
                         kernel_shape=[3], strides=[2], pads=[2, 2]),
        helper.make_node("AveragePool", ["m"], ["y"], name="avg1d",
                         kernel_shape=[2], auto_pad="SAME_UPPER"),
    ]
    return model(nodes, [vi("x", [1, 2, 9])], [vi("y", None)])


CASES = {f.__name__: f for f in [
    huge_input, redefined,
    large_swish,
    conv_bias, gemm, gemm_alpha, fixed_batch_view, fixed_batch_mask, batchnorm, batchnorm_training, pools,
    concat, reshape_chain, misc, clip_attr, unsupported, unnamed,
    dynamic_batch, bad_shapes, bad_add, fp16_weights, gemm_beta,
    unsupported_many, bn_inference, bn_training_dropout, zero_dim, unary_ops,
    gelu, reduce_ops, reduce_ops18, layernorm, split, split18,
    conv_transpose, pow_reduce_max, pools1d]}


def main():
    case, out = sys.argv[1], sys.argv[2]
    if case == "conv_bias_external":
        # Weights in "<out>.data" beside the model (as torch's dynamo
        # exporter writes large models).
        import os
        onnx.save_model(conv_bias(), out, save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location=os.path.basename(out) + ".data",
                        size_threshold=0)
        return
    m = CASES[case]()
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
