#!/usr/bin/env python3
"""Lower bounds for one compiled training step, read from the IR the CUDA
target compiles (`cnnc model.onnx --train --target gpu --emit mlir`).

Every top-level `cnn.*` op with tensor operands and results is put in one
of two classes:
  tensor-core: convolutions (forward, data and filter gradients, fused
      forms) and matmuls; their FLOPs at the GPU's dense f16 Tensor Core
      peak are their floor;
  memory-bound: everything else (BN statistics/apply/gradients, fused
      elementwise, pooling, loss, optimizer); the bytes of their operands
      and results at the GPU's HBM bandwidth are their floor (each read
      once, each written once: the best a kernel of that op can do).
Convolutions also move bytes; their byte floor is printed beside their
FLOP floor. Compare with CNNRT_PROFILE=1's per-op-kind times.

  python3 bench/roofline.py step.mlir [--func train_step] [--tflops 989] [--tbps 3.35]
Each op's floor is max(FLOPs at peak, bytes at HBM speed); the step's
floor is their sum (the ops as the compiler left them: fusing more moves
fewer bytes). (H100 SXM: 989 TFLOP/s dense f16 with f32 accumulation, 3.35 TB/s HBM3.)
"""
import argparse
import re
import sys
from collections import defaultdict

ELT = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i64": 8, "i32": 4, "i8": 1, "i1": 1}
TENSOR = re.compile(r"tensor<([0-9x]*)x?(f16|bf16|f32|f64|i64|i32|i8|i1)>|tensor<(f16|f32|i64|i32)>")
OP = re.compile(r"^\s*(?:%[^=]*=\s*)?cnn\.([a-z_0-9]+)\b")
CONV = {"conv2d", "fused_conv2d_stats", "conv2d_bwd_filter", "conv2d_bwd_data",
        "fused_conv2d_bwd_data", "conv_transpose2d", "matmul"}


def tensors(text):
    out = []
    for m in TENSOR.finditer(text):
        if m.group(3):
            out.append(((), m.group(3)))
            continue
        dims = tuple(int(d) for d in m.group(1).split("x") if d) if m.group(1) else ()
        out.append((dims, m.group(2)))
    return out


def nbytes(t):
    n = 1
    for d in t[0]:
        n *= d
    return n * ELT[t[1]]


def numel(t):
    n = 1
    for d in t[0]:
        n *= d
    return n


def conv_flops(op, ins, outs, attrs):
    groups = int(re.search(r"groups = (\d+)", attrs).group(1)) if "groups =" in attrs else 1
    if op == "matmul":
        a, b = ins[0][0], ins[1][0]
        k = a[-1]
        return 2 * numel(outs[0]) * k
    if op in ("conv2d", "fused_conv2d_stats"):
        y, w = outs[0], ins[1]
    elif op == "conv2d_bwd_filter":
        y, w = ins[1], outs[0]
    else:  # bwd_data: dy and the filter
        y, w = ins[0], ins[1]
    o, kh, kw, cg = w[0]
    return 2 * numel(y) * kh * kw * cg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlir")
    ap.add_argument("--tflops", type=float, default=989.0)
    ap.add_argument("--tbps", type=float, default=3.35)
    ap.add_argument("--func", default="train_step", help="the function to read")
    args = ap.parse_args()
    flops = defaultdict(float)
    floor = defaultdict(float)  # per op: max(its FLOPs at peak, its bytes at HBM speed)
    byts = defaultdict(float)
    count = defaultdict(int)
    inside = False
    for line in open(args.mlir):
        f = re.match(r"\s*func\.func (?:\w+ )?@([\w$.]+)", line)
        if f:
            inside = f.group(1) == args.func
            continue
        if not inside:
            continue
        m = OP.match(line)
        if not m or " : (" not in line and ") -> " not in line:
            continue
        op = m.group(1)
        # A reshape is a view of its operand's buffer: no kernel, no bytes.
        if op in ("yield", "step", "reshape"):
            continue
        # the signature: after the last " : " that precedes "->"
        sig_at = line.rfind(" : (")
        if sig_at < 0:
            sig_at = line.rfind(" : tensor")
        if sig_at < 0 or "->" not in line[sig_at:]:
            continue
        sig = line[sig_at + 3:]
        lhs, rhs = sig.split("->", 1)
        rhs = rhs.split("{")[0] if op == "fused_elementwise" else rhs
        ins, outs = tensors(lhs), tensors(rhs)
        if not outs:
            continue
        count[op] += 1
        byts[op] += sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)
        b = sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs)
        f = conv_flops(op, ins, outs, line[:sig_at]) if op in CONV else 0
        flops[op] += f
        floor[op] += max(f / (args.tflops * 1e12), b / (args.tbps * 1e12))
    tc_s = sum(flops.values()) / (args.tflops * 1e12)
    conv_b = sum(byts[o] for o in byts if o in CONV)
    mem_b = sum(byts[o] for o in byts if o not in CONV)
    print("%-38s %6s %10s %10s %9s %9s %9s" % ("op", "count", "GFLOP", "MB moved", "TC ms",
                                               "HBM ms", "floor ms"))
    for o in sorted(byts, key=lambda o: -floor[o]):
        print("%-38s %6d %10.6g %10.6g %9.3f %9.3f %9.3f" % (
            o, count[o], flops[o] / 1e9, byts[o] / 1e6, flops[o] / args.tflops / 1e9,
            byts[o] / args.tbps / 1e9, floor[o] * 1e3))
    print("tensor-core ops: %.1f GFLOP -> %.3f ms at %.0f TFLOP/s (their bytes: %.1f MB, %.3f ms at %.2f TB/s)"
          % (sum(flops.values()) / 1e9, tc_s * 1e3, args.tflops, conv_b / 1e6,
             conv_b / args.tbps / 1e9, args.tbps))
    print("memory-bound ops: %.1f MB -> %.3f ms at %.2f TB/s" % (mem_b / 1e6, mem_b / args.tbps / 1e9, args.tbps))
    conv_floor = sum(floor[o] for o in floor if o in CONV)
    print("tensor-core ops, each at max(FLOPs at peak, bytes at HBM speed): %.3f ms" % (conv_floor * 1e3))
    print("floor of the step (sum of the per-op floors, kernels as they are): %.3f ms"
          % (sum(floor.values()) * 1e3))


if __name__ == "__main__":
    sys.exit(main())
