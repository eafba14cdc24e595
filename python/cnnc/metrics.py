"""Evaluation metrics for what cnnc trains: mean IoU of dense prediction.

    hist = cnnc.confusion_matrix(trainer.eval(x), y, num_classes, ignore_index=255)
    miou, per_class = cnnc.miou(hist)

As torchvision's reference segmentation script (utils.ConfusionMatrix): a
num_classes x num_classes histogram of (target, prediction) pairs over the
pixels whose target is in [0, num_classes) (so ignore_index and any other
void label are left out), accumulated over batches by adding histograms.
"""
import torch


def confusion_matrix(output, target, num_classes, ignore_index=-100):
    """Histogram [target, prediction] over the valid pixels. `output` is
    N x C x H x W logits (the prediction is the arg-max over C) or N x H x W
    predicted classes; `target` N x H x W integer labels. A target that is
    neither a class nor `ignore_index` is a ValueError."""
    output, target = torch.as_tensor(output), torch.as_tensor(target)
    pred = output.argmax(1) if output.is_floating_point() else output
    if tuple(pred.shape) != tuple(target.shape):
        raise ValueError("prediction of shape %s, target of shape %s" %
                         (tuple(pred.shape), tuple(target.shape)))
    pred, target = pred.reshape(-1).long().cpu(), target.reshape(-1).long().cpu()
    bad = ((target < 0) | (target >= num_classes)) & (target != ignore_index)
    if bool(bad.any()):
        raise ValueError("target %d is not a class in [0, %d) nor the ignore_index %d"
                         % (int(target[bad][0]), num_classes, ignore_index))
    keep = target != ignore_index
    return torch.bincount(target[keep] * num_classes + pred[keep],
                          minlength=num_classes ** 2).reshape(num_classes, num_classes)


def miou(hist):
    """(mean IoU, per-class IoU) of a confusion matrix: IoU_c = TP / (TP +
    FP + FN); classes absent from both target and prediction are NaN in the
    per-class values and left out of the mean."""
    hist = torch.as_tensor(hist).double()
    tp = hist.diag()
    union = hist.sum(0) + hist.sum(1) - tp
    iou = tp / union  # 0 / 0 = NaN for absent classes
    valid = union > 0
    mean = iou[valid].mean().item() if bool(valid.any()) else float("nan")
    return mean, iou
