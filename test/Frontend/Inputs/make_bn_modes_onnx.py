"""A training export with one BatchNorm module in eval mode, as
torch.onnx.export(..., training=TrainingMode.PRESERVE) writes it: 'bn1' in
inference form (training_mode 0, one output), 'bn2' in training form."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_onnx import init, model, vi  # noqa: E402
from onnx import helper  # noqa: E402


def main():
    def bn(x, y, p, training):
        outs = [y, p + ".new_mean", p + ".new_var"] if training else [y]
        return helper.make_node(
            "BatchNormalization",
            [x, p + ".weight", p + ".bias", p + ".running_mean", p + ".running_var"],
            outs, name=p, epsilon=1e-5, momentum=0.9, training_mode=int(training))

    nodes = [helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="conv"),
             bn("c", "a", "bn1", False),
             bn("a", "b", "bn2", True),
             helper.make_node("GlobalAveragePool", ["b"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["y"], name="flat")]
    inits = [init("conv.weight", [3, 3, 1, 1])]
    for p in ("bn1", "bn2"):
        inits += [init(p + ".weight", [3]), init(p + ".bias", [3]),
                  init(p + ".running_mean", [3]), init(p + ".running_var", [3], scale=1.0)]
    m = model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)], inits, opset=15)
    with open(sys.argv[1], "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
