"""What cnnc.compile reads from the module besides its graph: the train/eval
mode of each module (frozen-BN fine-tuning) and the form of its outputs.

PyTorch decides per module: a BatchNorm module with `training == False`
normalizes with its running statistics, does not update them (nor
`num_batches_tracked`) and still passes gradients to its input and affine
parameters; a Dropout module in eval mode is the identity. cnnc.compile
exports with TrainingMode.PRESERVE, so each module comes out in its own mode
(an eval-mode BatchNorm as an inference-form BatchNormalization, which the
compiler keeps in the training step: cnn.batch_norm {use_running_stats}).
A whole model in eval() is therefore trained as PyTorch's loop would train
it: every BatchNorm frozen, Dropout off. See docs/python.md, "Fine-tuning a
pretrained model".
"""
import torch


def _batch_norms(model):
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]


def eval_batch_norms(model):
    """Names of the BatchNorm modules in eval mode (normalized with their
    running statistics in the compiled step). A module in eval mode without
    running statistics (track_running_stats=False) is an error naming it: in
    eval mode PyTorch normalizes it with the batch statistics after all, and
    no export of it says so."""
    from cnnc.api import CompileError
    names = []
    for name, m in _batch_norms(model):
        if m.training:
            continue
        if not m.track_running_stats or m.running_mean is None or m.running_var is None:
            raise CompileError(
                "BatchNorm module '%s' is in eval mode but has no running statistics "
                "(track_running_stats=False): an eval-mode BatchNorm normalizes with its "
                "running statistics in cnnc's step; put the module in training mode "
                "(model.%s.train()) or give it running statistics" % (name or "(model)", name))
        names.append(name)
    return names


def frozen_tracked(model):
    """The num_batches_tracked buffers that the compiled step leaves alone
    (those of eval-mode BatchNorm modules, as PyTorch does)."""
    return {("%s.num_batches_tracked" % name) if name else "num_batches_tracked"
            for name in eval_batch_norms(model)}


def mode_key(model):
    """The train/eval flag of every module, for the compile cache key: the
    graph cnnc builds depends on them, repr(model) does not show them."""
    return "".join("1" if m.training else "0" for m in model.modules())


def check_outputs(output_names, aux_loss_weight):
    """Outputs of the exported model: several (a tuple or dict) need an
    explicit aux_loss_weight, which says what the loss is. Returns the
    weight to compile with."""
    from cnnc.api import CompileError
    if len(output_names) <= 1:
        return 0.0 if aux_loss_weight is None else float(aux_loss_weight)
    if aux_loss_weight is None:
        raise CompileError(
            "the model returns %d outputs (a tuple or dict; exported as %s): pass "
            "aux_loss_weight= to train it as a main output with auxiliary heads, the "
            "loss being CE(%s) + aux_loss_weight * (sum of CE of the others) "
            "(torchvision's reference scripts use 0.4 for GoogLeNet/Inception-v3 and "
            "0.5 for the segmentation models' 'aux'); a model whose other outputs are "
            "not classifier logits (features, embeddings) should return the logits "
            "alone from forward()" % (len(output_names), ", ".join(output_names),
                                      output_names[0]))
    return float(aux_loss_weight)


def onnx_output_names(onnx_path):
    import onnx
    return [o.name for o in onnx.load(onnx_path, load_external_data=False).graph.output]
