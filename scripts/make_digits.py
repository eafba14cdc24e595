#!/usr/bin/env python3
"""Converts the 8x8 handwritten digits that Debian's python3-sklearn ships
(1,797 images, sklearn/datasets/data/digits.csv.gz) into CIFAR-10's binary
format, the format `--data` reads: records of 1 label byte + 3*32*32 pixel
bytes (CHW). Each 8x8 image (values 0..16) is scaled to 0..255, enlarged 4x
(nearest neighbour) and replicated over 3 channels, so models made for
CIFAR-sized input (SimpleCNN) train on it unchanged.

A fixed permutation (seed 0) splits it into data_batch_1.bin (1,500 images,
training) and test_batch.bin (297 images, held out).
"""
import argparse
import gzip
import os
import sys

import numpy as np

DEFAULT_SRC = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--src", default=DEFAULT_SRC)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--train", type=int, default=1500)
    args = ap.parse_args()
    if not os.path.exists(args.src):
        sys.exit(f"make_digits: {args.src} not found (install python3-sklearn)")
    with gzip.open(args.src, "rt") as f:
        rows = np.loadtxt(f, delimiter=",", dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != 65:
        sys.exit(f"make_digits: unexpected shape {rows.shape} in {args.src}")
    images = rows[:, :64].reshape(-1, 8, 8)
    labels = rows[:, 64].astype(np.uint8)
    pix = np.clip(np.rint(images * (255.0 / 16.0)), 0, 255).astype(np.uint8)
    pix = pix.repeat(4, axis=1).repeat(4, axis=2)           # 32 x 32
    pix = np.broadcast_to(pix[:, None], (len(pix), 3, 32, 32))  # CHW, 3 channels
    perm = np.random.RandomState(0).permutation(len(pix))
    os.makedirs(args.out, exist_ok=True)
    for name, idx in (("data_batch_1.bin", perm[: args.train]),
                      ("test_batch.bin", perm[args.train:])):
        rec = np.concatenate([labels[idx, None], pix[idx].reshape(len(idx), -1)], axis=1)
        path = os.path.join(args.out, name)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(rec.astype(np.uint8).tobytes())
        os.replace(tmp, path)  # atomic
        print(f"make_digits: wrote {len(idx)} images to {path}")


if __name__ == "__main__":
    main()
