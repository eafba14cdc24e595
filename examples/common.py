"""What the examples share: the training loop with a progress bar (loss,
img/s, ETA), held-out top-1 accuracy through trainer.eval, and the
loss-curve picture. Nothing here is cnnc-specific beyond `trainer.step` and
`trainer.eval`: it is the loop a PyTorch user already has."""
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# A source checkout works without `pip install ./python`.
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def add_training_args(ap, epochs, batch, weight_decay, workers, out):
    """The flags both examples take, with each one's defaults."""
    ap.add_argument("--epochs", type=int, default=epochs)
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    ap.add_argument("--batch", type=int, default=batch)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=weight_decay)
    ap.add_argument("--workers", type=int, default=workers)
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--out", default=out, help="where loss.png and the weights go")


def pick_device(requested):
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but torch sees no CUDA GPU")
    return requested


def train(trainer, loader, scheduler, device, epochs, max_steps=None):
    """Trains for `epochs` passes over `loader` (or `max_steps` steps);
    returns the loss of every step."""
    from tqdm import tqdm

    per_epoch = len(loader)
    total = epochs * per_epoch
    if max_steps is not None:
        total = min(total, max_steps)
    if total == 0:
        sys.exit("error: the data has fewer images than one batch")
    losses = []
    bar = tqdm(total=total, unit="step", dynamic_ncols=True,
               disable=None if sys.stderr.isatty() else False)
    t0, seen = time.perf_counter(), 0
    for epoch in range(epochs):
        for x, y in loader:
            if len(losses) == total:
                break
            loss = trainer.step(x.to(device, non_blocking=True),
                                y.to(device, non_blocking=True))
            if scheduler is not None:
                scheduler.step()
            losses.append(float(loss))
            seen += x.shape[0]
            rate = seen / (time.perf_counter() - t0)
            bar.set_postfix(epoch=epoch, loss="%.4f" % losses[-1],
                            lr="%.4g" % trainer.current_lr(),
                            img_s="%.1f" % rate)
            bar.update(1)  # tqdm's own ETA is the remaining steps' time
    bar.close()
    return losses


def evaluate(trainer, loader, device):
    """Top-1 accuracy of the trainer's inference-mode forward (BN running
    statistics) over `loader` (whole batches of the compiled size)."""
    correct = total = 0
    for x, y in loader:
        logits = trainer.eval(x.to(device))
        correct += int((logits.argmax(1).cpu() == y).sum())
        total += y.numel()
    return correct / max(total, 1)


def plot_losses(losses, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(losses) + 1), losses, lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)  # never a half-written picture


def save_weights(trainer, model, path):
    trainer.sync_to(model)
    tmp = path + ".tmp"
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)
