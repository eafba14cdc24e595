"""Writes small ONNX models for new-ops.test (the importer forms of the
activations, Min/Max, reductions, LogSoftmax, InstanceNormalization, 1-D Conv
and BatchNormalization of issue 32); onnx.helper only.

    %python make_new_ops_onnx.py <case> <output.onnx>
"""
import os
import sys

import numpy as np
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_onnx import init, ints, model, vi  # noqa: E402


def floats(name, values, shape=None):
    a = np.array(values, dtype=np.float32)
    return numpy_helper.from_array(a.reshape(shape) if shape else a, name)


def activations():
    # Elu/Selu/Celu/Softplus/Log with their attributes; PRelu with a C x 1 x 1
    # slope initializer and with PyTorch's one-value weight [1] behind an
    # Unsqueeze (still a parameter).
    nodes = [
        helper.make_node("Elu", ["x"], ["a"], name="elu", alpha=0.5),
        helper.make_node("Selu", ["a"], ["b"], name="selu"),
        helper.make_node("Celu", ["b"], ["c"], name="celu", alpha=2.0),
        helper.make_node("Softplus", ["c"], ["d"], name="softplus"),
        helper.make_node("Log", ["d"], ["e"], name="log"),
        helper.make_node("PRelu", ["e", "slope"], ["f"], name="prelu_c"),
        helper.make_node("Unsqueeze", ["act.weight", "axes"], ["w3"],
                         name="unsq"),
        helper.make_node("PRelu", ["f", "w3"], ["y"], name="prelu_1"),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)],
                 [init("slope", [3, 1, 1], 0.1), floats("act.weight", [0.25]),
                  ints("axes", [1, 2])])


def minmax():
    # Max of three (one broadcast [C,1,1] initializer, a constant scalar),
    # Min of one (identity) and of two run-time tensors; Min of two
    # constants folds.
    nodes = [
        helper.make_node("Max", ["x", "b", "s"], ["m"], name="max3"),
        helper.make_node("Min", ["m"], ["m1"], name="min1"),
        helper.make_node("Min", ["lo", "hi"], ["cmin"], name="cfold"),
        helper.make_node("Min", ["m1", "x"], ["m2"], name="min2"),
        helper.make_node("Mul", ["m2", "cmin"], ["y"], name="mul"),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)],
                 [init("b", [3, 1, 1]), floats("s", [0.5], []),
                  floats("lo", [2.0], []), floats("hi", [3.0], [])])


def reductions(opset=13):
    # GlobalMaxPool; ReduceL2 over H, W kept and over C dropped (axes as
    # attribute before opset 18, input from 18).
    axes_a, axes_b = [2, 3], [-3]
    nodes = [helper.make_node("GlobalMaxPool", ["x"], ["g"], name="gmp")]
    inits = []
    if opset < 18:
        nodes += [
            helper.make_node("ReduceL2", ["x"], ["n"], name="l2", axes=axes_a,
                             keepdims=1),
            helper.make_node("ReduceL2", ["n"], ["r"], name="l2c",
                             axes=axes_b, keepdims=0),
        ]
    else:
        nodes += [
            helper.make_node("ReduceL2", ["x", "axa"], ["n"], name="l2",
                             keepdims=1),
            helper.make_node("ReduceL2", ["n", "axb"], ["r"], name="l2c",
                             keepdims=0),
        ]
        inits = [ints("axa", axes_a), ints("axb", axes_b)]
    nodes.append(helper.make_node("Add", ["g", "n"], ["y"], name="add"))
    return model(nodes, [vi("x", [2, 3, 4, 5])], [vi("y", None), vi("r", None)],
                 inits, opset=opset)


def reductions18():
    return reductions(18)


def reductions_composed(opset=13):
    # ReduceL1, ReduceSumSquare, ReduceLogSum, ReduceMin over H, W (axes as
    # attribute before opset 18, input from 18); ReduceMin drops them.
    ops = [("ReduceL1", 1), ("ReduceSumSquare", 1), ("ReduceLogSum", 1),
           ("ReduceMin", 0)]
    nodes, inits = [], []
    for op, keep in ops:
        if opset < 18:
            nodes.append(helper.make_node(op, ["x"], [op], name=op.lower(),
                                          axes=[2, -1], keepdims=keep))
        else:
            nodes.append(helper.make_node(op, ["x", "axes"], [op],
                                          name=op.lower(), keepdims=keep))
    if opset >= 18:
        inits = [ints("axes", [2, -1])]
    return model(nodes, [vi("x", [2, 3, 4, 5])], [vi(op, None) for op, _ in ops],
                 inits, opset=opset)


def reductions_composed18():
    return reductions_composed(18)


def logsoftmax(opset=13):
    # Opset 13: over the last axis by default. Opset 11, axis 1: over [1, 3)
    # (the input flattened to 2-D at the axis).
    attrs = {} if opset >= 13 else {"axis": 1}
    nodes = [helper.make_node("LogSoftmax", ["x"], ["y"], name="lsm", **attrs)]
    return model(nodes, [vi("x", [2, 3, 4])], [vi("y", None)], opset=opset)


def logsoftmax11():
    return logsoftmax(11)


def instancenorm():
    # InstanceNorm2d(affine=True): scale and bias parameters; then
    # GroupNorm(2, 4) as PyTorch exports it: Reshape to N x G x -1, Constant
    # scale 1 and bias 0 (left out), Reshape back, Mul, Add.
    nodes = [
        helper.make_node("InstanceNormalization", ["x", "in.weight", "in.bias"],
                         ["a"], name="inorm", epsilon=1e-3),
        helper.make_node("Reshape", ["a", "gshape"], ["ar"], name="r1"),
        helper.make_node("Constant", [], ["ones"], name="c1",
                         value=floats("ones", [1.0, 1.0])),
        helper.make_node("Constant", [], ["zeros"], name="c0",
                         value=floats("zeros", [0.0, 0.0])),
        helper.make_node("InstanceNormalization", ["ar", "ones", "zeros"],
                         ["gn"], name="gnorm"),
        helper.make_node("Reshape", ["gn", "xshape"], ["g"], name="r2"),
        helper.make_node("Unsqueeze", ["gn.weight", "axes"], ["gw"], name="u1"),
        helper.make_node("Mul", ["g", "gw"], ["gm"], name="mul"),
        helper.make_node("Unsqueeze", ["gn.bias", "axes"], ["gb"], name="u2"),
        helper.make_node("Add", ["gm", "gb"], ["y"], name="add"),
    ]
    return model(nodes, [vi("x", [2, 4, 3, 3])], [vi("y", None)],
                 [init("in.weight", [4]), init("in.bias", [4]),
                  ints("gshape", [0, 2, -1]), ints("xshape", [2, 4, 3, 3]),
                  init("gn.weight", [4]), init("gn.bias", [4]),
                  ints("axes", [1, 2])])


def conv1d():
    # Conv1d with bias, padding and stride; a grouped one with SAME_UPPER.
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], name="conv1",
                         pads=[1, 2], strides=[2]),
        helper.make_node("Conv", ["c", "w2"], ["y"], name="conv_dw", group=4,
                         auto_pad="SAME_UPPER", kernel_shape=[3]),
    ]
    return model(nodes, [vi("x", [2, 3, 10])], [vi("y", None)],
                 [init("w1", [4, 3, 3]), init("b1", [4]),
                  init("w2", [4, 1, 3])])


def batchnorm1d():
    # BatchNorm1d on N x C x L (as N x C x L x 1) and on N x C (native), in
    # training form (an inference-form node is an eval-mode module).
    def bn(x, y, p):
        return helper.make_node(
            "BatchNormalization",
            [x, p + ".weight", p + ".bias", p + ".running_mean",
             p + ".running_var"], [y, p + ".new_mean", p + ".new_var"], name=p,
            epsilon=1e-5, momentum=0.9, training_mode=1)

    nodes = [bn("x", "a", "bn3"),
             helper.make_node("Flatten", ["a"], ["f"], name="flat"),
             bn("f", "y", "bn2")]
    inits = []
    for p, c in (("bn3", 3), ("bn2", 15)):
        inits += [init(p + ".weight", [c]), init(p + ".bias", [c]),
                  init(p + ".running_mean", [c]),
                  floats(p + ".running_var", [1.0] * c)]
    return model(nodes, [vi("x", [2, 3, 5])], [vi("y", None)], inits,
                 opset=15)


def mish():
    nodes = [helper.make_node("Mish", ["x"], ["y"], name="mish")]
    return model(nodes, [vi("x", [2, 3])], [vi("y", None)], opset=18)


def celu_zero():
    nodes = [helper.make_node("Celu", ["x"], ["y"], name="celu0", alpha=0.0)]
    return model(nodes, [vi("x", [2, 3])], [vi("y", None)])


def prelu_bad():
    # The slope would broadcast the input (bidirectional), which PRelu's
    # unidirectional broadcasting does not allow.
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")]
    return model(nodes, [vi("x", [2, 1])], [vi("y", None)],
                 [init("slope", [2, 4])])


def max_bad():
    nodes = [helper.make_node("Max", ["x", "b"], ["y"], name="max_bad")]
    return model(nodes, [vi("x", [2, 3])], [vi("y", None)],
                 [init("b", [4, 3])])


def conv3d():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv3d")]
    return model(nodes, [vi("x", [1, 2, 4, 4, 4])], [vi("y", None)],
                 [init("w", [2, 2, 1, 1, 1])])


def expand_gate():
    # ECA's x * y.expand_as(x): the Mul broadcasts y anyway, so it reads y.
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], name="gap", axes=[2, 3],
                         keepdims=1),
        helper.make_node("Sigmoid", ["m"], ["g"], name="sig"),
        helper.make_node("Expand", ["g", "shape"], ["e"], name="expand"),
        helper.make_node("Mul", ["x", "e"], ["y"], name="gate"),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)],
                 [ints("shape", [2, 3, 4, 4])])


def expand_broadcast():
    # Expands whose consumers need the broadcast: N x C x 1 x 1 over H, W
    # (a shape of 1s where the input has sizes) into a Relu; a one-value
    # mean to 2 x 64 x 32 x 32 (two zero constants, each at most 2^16
    # elements); a W vector to 3 x 1 x W (fewer dimensions than the result)
    # into an Add whose other operand has the expanded shape (read through)
    # and into the graph output (kept).
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], name="gap", axes=[2, 3],
                         keepdims=1),
        helper.make_node("Expand", ["m", "s1"], ["e1"], name="expand_hw"),
        helper.make_node("Relu", ["e1"], ["r"], name="relu"),
        helper.make_node("ReduceMean", ["x"], ["a"], name="all", keepdims=1),
        helper.make_node("Expand", ["a", "s2"], ["e2"], name="expand_big"),
        helper.make_node("ReduceMean", ["x"], ["w"], name="w", axes=[0, 1, 2],
                         keepdims=0),
        helper.make_node("Expand", ["w", "s3"], ["e3"], name="expand_rank"),
        helper.make_node("Add", ["r", "e3"], ["y"], name="add"),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 4])],
                 [vi("y", None), vi("e2", None), vi("e3", None)],
                 [ints("s1", [1, 1, 4, 4]), ints("s2", [2, 64, 32, 32]),
                  ints("s3", [3, 1, 1])])


def expand_const():
    # An Expand of a constant folds (here into the factor of a cnn.scale).
    two = helper.make_tensor("two", 1, [1], [2.0])
    nodes = [
        helper.make_node("Constant", [], ["c"], name="c", value=two),
        helper.make_node("Expand", ["c", "shape"], ["e"], name="expand"),
        helper.make_node("Mul", ["x", "e"], ["y"], name="mul"),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)],
                 [ints("shape", [1, 3, 1, 1])])


def expand_bad():
    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")]
    return model(nodes, [vi("x", [2, 3])], [vi("y", None)],
                 [ints("shape", [4, 3])])


def batchnorm_affine_false():
    # PyTorch's BatchNorm2d(affine=False): scale and bias are Constant nodes
    # (ones, zeros), no parameters; an initializer behind an Identity (an
    # eval export's deduplicated weights) is a parameter of its own.
    ones = helper.make_tensor("ones", 1, [3], [1.0] * 3)
    zeros = helper.make_tensor("zeros", 1, [3], [0.0] * 3)
    nodes = [
        helper.make_node("Constant", [], ["scale"], name="c1", value=ones),
        helper.make_node("Constant", [], ["bias"], name="c2", value=zeros),
        helper.make_node("BatchNormalization",
                         ["x", "scale", "bias", "mean", "var"], ["b"],
                         name="bn"),
        helper.make_node("Identity", ["bn1.weight"], ["bn2.weight"],
                         name="dedup"),
        helper.make_node("BatchNormalization",
                         ["b", "bn2.weight", "bn1.bias", "mean2", "var2"],
                         ["c"], name="bn2"),
        # InstanceNorm2d(affine=True) at its initial ones and zeros, behind
        # Identity nodes: parameters, not identity constants to drop.
        helper.make_node("Identity", ["in1.weight"], ["in2.weight"],
                         name="dedup_w"),
        helper.make_node("Identity", ["in1.bias"], ["in2.bias"],
                         name="dedup_b"),
        helper.make_node("InstanceNormalization",
                         ["c", "in2.weight", "in2.bias"], ["y"], name="in2"),
    ]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)],
                 [init("mean", [3]), init("var", [3]), init("mean2", [3]),
                  init("var2", [3]), init("bn1.weight", [3]),
                  init("bn1.bias", [3]), floats("in1.weight", [1.0] * 3),
                  floats("in1.bias", [0.0] * 3)])


CASES = {f.__name__: f for f in [
    activations, minmax, reductions, reductions18, reductions_composed,
    reductions_composed18, logsoftmax, logsoftmax11,
    instancenorm, conv1d, batchnorm1d, mish, celu_zero, prelu_bad, max_bad,
    conv3d, expand_gate, expand_broadcast, expand_const, expand_bad,
    batchnorm_affine_false]}


def main():
    case, out = sys.argv[1], sys.argv[2]
    with open(out, "wb") as f:
        f.write(CASES[case]().SerializeToString())


if __name__ == "__main__":
    main()
