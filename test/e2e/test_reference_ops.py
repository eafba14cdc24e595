"""Every cnn op through the reference interpreter vs PyTorch (CPU, f32).

Each test builds a tiny function, runs it with cnnc-reference-run and
compares with torch.nn.functional / autograd / torch.optim at a max
(normwise) relative error of 1e-5.
"""
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_reference_harness import Fn, assert_close, run  # noqa: E402

TOL = 1e-5
torch.set_num_threads(1)


def rnd(*shape, seed=0, lo=-1.0, hi=1.0):
    g = np.random.default_rng(seed)
    return g.uniform(lo, hi, size=shape).astype(np.float32)


def t(x, grad=False):
    return torch.tensor(x, requires_grad=grad)


# --------------------------------------------------------------------------
# Convolution
# --------------------------------------------------------------------------

# (N, C, H, W, F, KH, KW, stride, padding (t, l, b, r), dilation, groups)
CONV_CASES = [
    (2, 3, 8, 8, 4, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (1, 4, 9, 7, 6, 3, 2, (2, 1), (0, 1, 2, 0), (1, 2), 2),
    (2, 6, 8, 8, 6, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 6),
    (1, 8, 5, 5, 16, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (2, 3, 16, 16, 8, 7, 7, (2, 2), (3, 3, 3, 3), (1, 1), 1),
    (2, 8, 6, 6, 8, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1), 1),
    (1, 4, 10, 10, 4, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 1),
]


def conv_attrs(stride, pad, dil, groups):
    return {"strides": stride, "padding": pad, "dilations": dil,
            "groups": groups}


def torch_conv(x, w, stride, pad, dil, groups):
    t_, l, b, r = pad
    xp = F.pad(x, (l, r, t_, b))
    return F.conv2d(xp, w, stride=stride, dilation=dil, groups=groups)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_forward_and_backward(case):
    n, c, h, w_, f, kh, kw, stride, pad, dil, groups = case
    x = rnd(n, c, h, w_, seed=1)
    w = rnd(f, c // groups, kh, kw, seed=2)
    tx, tw = t(x, True), t(w, True)
    ty_ = torch_conv(tx, tw, stride, pad, dil, groups)
    dy = rnd(*ty_.shape, seed=3)
    ty_.backward(torch.tensor(dy))

    attrs = conv_attrs(stride, pad, dil, groups)
    fn = Fn()
    ax, aw, ady = fn.arg(x.shape), fn.arg(w.shape), fn.arg(dy.shape)
    y = fn.op("conv2d", [ax, aw], attrs, [dy.shape])
    dx = fn.op("conv2d_bwd_data", [ady, aw], attrs, [x.shape])
    dw = fn.op("conv2d_bwd_filter", [ax, ady], attrs, [w.shape])
    oy, odx, odw = run(fn, [y, dx, dw], [x, w, dy])
    assert_close(oy, ty_, TOL, "conv2d")
    assert_close(odx, tx.grad, TOL, "conv2d_bwd_data")
    assert_close(odw, tw.grad, TOL, "conv2d_bwd_filter")


# --------------------------------------------------------------------------
# Elementwise and per-channel
# --------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 6)])
def test_bias_add_and_grad(shape):
    x = rnd(*shape, seed=4)
    b = rnd(shape[1], seed=5)
    tx, tb = t(x, True), t(b, True)
    bshape = [1, shape[1]] + [1] * (len(shape) - 2)
    ty_ = tx + tb.view(bshape)
    dy = rnd(*shape, seed=6)
    ty_.backward(torch.tensor(dy))
    fn = Fn()
    ax, ab, ady = fn.arg(x.shape), fn.arg(b.shape), fn.arg(dy.shape)
    y = fn.op("bias_add", [ax, ab])
    db = fn.op("bias_grad", [ady], None, [b.shape])
    oy, odb = run(fn, [y, db], [x, b, dy])
    assert_close(oy, ty_, TOL, "bias_add")
    assert_close(odb, tb.grad, TOL, "bias_grad")


def test_relu_clip_and_grads():
    x = rnd(3, 4, 5, 6, seed=7, lo=-3, hi=9)
    dy = rnd(3, 4, 5, 6, seed=8)
    tx = t(x, True)
    tr = F.relu(tx)
    tr.backward(torch.tensor(dy))
    relu_grad = tx.grad.clone()
    tx.grad = None
    tc = F.hardtanh(tx, 0.0, 6.0)  # ReLU6
    tc.backward(torch.tensor(dy))
    fn = Fn()
    ax, ady = fn.arg(x.shape), fn.arg(dy.shape)
    r = fn.op("relu", [ax])
    rg = fn.op("relu_grad", [ady, r])
    cl = fn.op("clip", [ax], {"min": 0.0, "max": 6.0})
    cg = fn.op("clip_grad", [ady, ax], {"min": 0.0, "max": 6.0})
    o = run(fn, [r, rg, cl, cg], [x, dy])
    assert_close(o[0], tr, 0, "relu")
    assert_close(o[1], relu_grad, 0, "relu_grad")
    assert_close(o[2], tc, 0, "clip")
    assert_close(o[3], tx.grad, 0, "clip_grad")


def test_add_mul_scale():
    a, b = rnd(2, 3, 4, seed=9), rnd(2, 3, 4, seed=10)
    fn = Fn()
    aa, ab = fn.arg(a.shape), fn.arg(b.shape)
    s = fn.op("add", [aa, ab])
    m = fn.op("mul", [aa, ab])
    sc = fn.op("scale", [aa], {"factor": -0.375})
    o = run(fn, [s, m, sc], [a, b])
    ta, tb = torch.tensor(a), torch.tensor(b)
    assert_close(o[0], ta + tb, 0, "add")
    assert_close(o[1], ta * tb, 0, "mul")
    assert_close(o[2], ta * -0.375, 0, "scale")


# --------------------------------------------------------------------------
# Batch normalization
# --------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 6), (8, 2, 3, 3)])
def test_batch_norm_train_and_grad(shape):
    c = shape[1]
    x = rnd(*shape, seed=11, lo=-2, hi=3)
    w, b = rnd(c, seed=12, lo=0.5, hi=1.5), rnd(c, seed=13)
    rm, rv = rnd(c, seed=14), rnd(c, seed=15, lo=0.5, hi=2)
    eps, mom = 1e-5, 0.1
    tx, tw, tb = t(x, True), t(w, True), t(b, True)
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    y_t, save_mean, save_invstd = torch.native_batch_norm(
        tx, tw, tb, trm, trv, True, mom, eps)
    dy = rnd(*shape, seed=16)
    y_t.backward(torch.tensor(dy))

    fn = Fn()
    ax, aw, ab, arm, arv, ady = (fn.arg(x.shape), fn.arg(w.shape),
                                 fn.arg(b.shape), fn.arg(rm.shape),
                                 fn.arg(rv.shape), fn.arg(dy.shape))
    y, sm, si, nrm, nrv = fn.op(
        "batch_norm_train", [ax, aw, ab, arm, arv],
        {"epsilon": eps, "momentum": mom},
        [x.shape, (c,), (c,), (c,), (c,)])
    gx, gw, gb = fn.op("batch_norm_grad", [ady, ax, aw, sm, si], None,
                       [x.shape, (c,), (c,)])
    o = run(fn, [y, sm, si, nrm, nrv, gx, gw, gb], [x, w, b, rm, rv, dy])
    assert_close(o[0], y_t, TOL, "y")
    assert_close(o[1], save_mean, TOL, "saved_mean")
    assert_close(o[2], save_invstd, TOL, "saved_invstd")
    assert_close(o[3], trm, TOL, "running_mean")
    assert_close(o[4], trv, TOL, "running_var")
    assert_close(o[5], tx.grad, TOL, "grad_input")
    assert_close(o[6], tw.grad, TOL, "grad_scale")
    assert_close(o[7], tb.grad, TOL, "grad_bias")


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 6)])
def test_batch_norm_inference(shape):
    c = shape[1]
    x = rnd(*shape, seed=17)
    w, b, m = rnd(c, seed=18), rnd(c, seed=19), rnd(c, seed=20)
    v = rnd(c, seed=21, lo=0.1, hi=2)
    fn = Fn()
    args = [fn.arg(a.shape) for a in (x, w, b, m, v)]
    y = fn.op("batch_norm", args, {"epsilon": 1e-3})
    (o,) = run(fn, [y], [x, w, b, m, v])
    want = F.batch_norm(torch.tensor(x), torch.tensor(m), torch.tensor(v),
                        torch.tensor(w), torch.tensor(b), False, 0.1, 1e-3)
    assert_close(o, want, TOL, "batch_norm")


# --------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------

# (N, C, H, W, kernel, stride, padding (h, w), ceil_mode)
POOL_CASES = [
    (2, 3, 7, 7, (3, 3), (2, 2), (1, 1), True),
    (2, 3, 7, 7, (3, 3), (2, 2), (1, 1), False),
    (1, 2, 8, 8, (2, 2), (2, 2), (0, 0), False),
    (2, 2, 6, 5, (3, 3), (2, 2), (1, 1), True),
    (1, 1, 4, 4, (3, 3), (2, 2), (0, 0), True),
    (1, 2, 9, 9, (3, 3), (3, 3), (1, 1), True),
    (1, 2, 5, 6, (2, 2), (1, 1), (1, 1), False),
    (2, 2, 7, 6, (3, 2), (2, 1), (1, 1), True),
    (1, 1, 5, 5, (2, 2), (2, 2), (0, 0), True),
]


def pool_attrs(k, s, p, ceil):
    return {"kernel": k, "strides": s, "padding": (p[0], p[1], p[0], p[1]),
            "ceil_mode": ceil}


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool2d_and_grad(case, ties):
    n, c, h, w, k, s, p, ceil = case
    if ties:  # few distinct values: the first maximum must win
        x = np.random.default_rng(22).integers(-2, 2, (n, c, h, w)).astype(
            np.float32)
    else:
        x = rnd(n, c, h, w, seed=22)
    tx = t(x, True)
    ty_ = F.max_pool2d(tx, k, s, p, ceil_mode=ceil)
    dy = rnd(*ty_.shape, seed=23)
    ty_.backward(torch.tensor(dy))
    attrs = pool_attrs(k, s, p, ceil)
    fn = Fn()
    ax, ady = fn.arg(x.shape), fn.arg(dy.shape)
    y = fn.op("max_pool2d", [ax], attrs, [dy.shape])
    dx = fn.op("max_pool2d_grad", [ady, ax], attrs, [x.shape])
    oy, odx = run(fn, [y, dx], [x, dy])
    assert_close(oy, ty_, 0, "max_pool2d")
    assert_close(odx, tx.grad, TOL, "max_pool2d_grad")


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool2d_and_grad(case, include_pad):
    n, c, h, w, k, s, p, ceil = case
    x = rnd(n, c, h, w, seed=24)
    tx = t(x, True)
    ty_ = F.avg_pool2d(tx, k, s, p, ceil_mode=ceil,
                       count_include_pad=include_pad)
    dy = rnd(*ty_.shape, seed=25)
    ty_.backward(torch.tensor(dy))
    attrs = pool_attrs(k, s, p, ceil)
    attrs["count_include_pad"] = include_pad
    fn = Fn()
    ax, ady = fn.arg(x.shape), fn.arg(dy.shape)
    y = fn.op("avg_pool2d", [ax], attrs, [dy.shape])
    dx = fn.op("avg_pool2d_grad", [ady], attrs, [x.shape])
    oy, odx = run(fn, [y, dx], [x, dy])
    assert_close(oy, ty_, TOL, "avg_pool2d")
    assert_close(odx, tx.grad, TOL, "avg_pool2d_grad")


def test_global_avg_pool_and_grad():
    x = rnd(2, 3, 5, 7, seed=26)
    tx = t(x, True)
    ty_ = F.adaptive_avg_pool2d(tx, 1)
    dy = rnd(2, 3, 1, 1, seed=27)
    ty_.backward(torch.tensor(dy))
    fn = Fn()
    ax, ady = fn.arg(x.shape), fn.arg(dy.shape)
    y = fn.op("global_avg_pool", [ax], None, [dy.shape])
    dx = fn.op("global_avg_pool_grad", [ady], None, [x.shape])
    oy, odx = run(fn, [y, dx], [x, dy])
    assert_close(oy, ty_, TOL, "global_avg_pool")
    assert_close(odx, tx.grad, TOL, "global_avg_pool_grad")


# --------------------------------------------------------------------------
# Matmul and data movement
# --------------------------------------------------------------------------

@pytest.mark.parametrize("tl", [False, True])
@pytest.mark.parametrize("tr", [False, True])
def test_matmul(tl, tr):
    m, k, n = 5, 33, 7
    a = rnd(*((k, m) if tl else (m, k)), seed=28)
    b = rnd(*((n, k) if tr else (k, n)), seed=29)
    fn = Fn()
    aa, ab = fn.arg(a.shape), fn.arg(b.shape)
    y = fn.op("matmul", [aa, ab], {"transpose_lhs": tl, "transpose_rhs": tr},
              [(m, n)])
    (o,) = run(fn, [y], [a, b])
    ta = torch.tensor(a).t() if tl else torch.tensor(a)
    tb = torch.tensor(b).t() if tr else torch.tensor(b)
    assert_close(o, ta @ tb, TOL, "matmul")


def test_data_movement():
    x = rnd(2, 3, 4, 5, seed=30)
    z = rnd(2, 2, 4, 5, seed=31)
    fn = Fn()
    ax, az = fn.arg(x.shape), fn.arg(z.shape)
    fl = fn.op("flatten", [ax], {"axis": 2}, [(6, 20)])
    rs = fn.op("reshape", [ax], None, [(6, 4, 5)])
    cat = fn.op("concat", [ax, az, ax], {"axis": 1}, [(2, 8, 4, 5)])
    sl = fn.op("slice", [cat], {"offsets": (1, 2, 1, 0),
                                "sizes": (1, 4, 2, 5)}, [(1, 4, 2, 5)])
    tr = fn.op("transpose", [ax], {"permutation": (0, 2, 3, 1)},
               [(2, 4, 5, 3)])
    dr = fn.op("dropout", [ax], {"ratio": 0.5})
    o = run(fn, [fl, rs, cat, sl, tr, dr], [x, z])
    tx, tz = torch.tensor(x), torch.tensor(z)
    tcat = torch.cat([tx, tz, tx], 1)
    assert_close(o[0], tx.reshape(6, 20), 0, "flatten")
    assert_close(o[1], tx.reshape(6, 4, 5), 0, "reshape")
    assert_close(o[2], tcat, 0, "concat")
    assert_close(o[3], tcat[1:2, 2:6, 1:3, 0:5], 0, "slice")
    assert_close(o[4], tx.permute(0, 2, 3, 1), 0, "transpose")
    assert_close(o[5], tx, 0, "dropout")


def test_cast_rounds_like_torch_half():
    x = np.concatenate([rnd(1000, seed=32, lo=-70000, hi=70000),
                        rnd(1000, seed=33, lo=-1e-4, hi=1e-4),
                        np.array([65504, 65519, 65520, 1e-8, 6e-8],
                                 np.float32)])
    fn = Fn()
    ax = fn.arg(x.shape)
    h = fn.op("cast", [ax], None, [x.shape], dtype="f16")
    back = fn.op("cast", [h], None, [x.shape], dtype="f32")
    oh, ob = run(fn, [h, back], [x])
    want = torch.tensor(x).half()
    assert oh.dtype == np.float16
    np.testing.assert_array_equal(oh, want.numpy())
    np.testing.assert_array_equal(ob, want.float().numpy())


def splitmix64(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9))
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB))
    return x ^ (x >> np.uint64(31))


def test_dropout_mask_matches_documented_hash():
    seed, step, ratio, shape = 1234, 3, 0.3, (4, 50)
    with np.errstate(over="ignore"):
        idx = np.arange(np.prod(shape), dtype=np.uint64)
        s = splitmix64(np.array([seed], np.uint64))
        s = splitmix64(s + np.uint64(step))
        h = splitmix64(s + idx)
    u = (h >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    want = np.where(u < ratio, 0.0, 1.0 / (1.0 - ratio)).astype(np.float32)
    want = want.reshape(shape)
    fn = Fn()
    astep = fn.arg(())
    m = fn.op("dropout_mask", [astep], {"ratio": ratio, "seed": seed},
              [shape])
    (o,) = run(fn, [m], [np.array(step, np.float32)])
    np.testing.assert_allclose(o, want, rtol=1e-6)
    assert 0.2 < (o == 0).mean() < 0.4


# --------------------------------------------------------------------------
# Softmax and loss
# --------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax(axis):
    x = rnd(3, 4, 5, seed=34, lo=-5, hi=5)
    fn = Fn()
    ax = fn.arg(x.shape)
    y = fn.op("softmax", [ax], {"axis": axis})
    (o,) = run(fn, [y], [x])
    assert_close(o, torch.softmax(torch.tensor(x), axis), TOL, "softmax")


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("label_type", ["i32", "i64"])
def test_softmax_cross_entropy_and_grad(smoothing, label_type):
    n, c = 6, 7
    logits = rnd(n, c, seed=35, lo=-8, hi=8)
    labels = np.random.default_rng(36).integers(0, c, n)
    labels = labels.astype(np.int32 if label_type == "i32" else np.int64)
    grad_loss = np.array(0.7, np.float32)
    tl = t(logits, True)
    loss = F.cross_entropy(tl, torch.tensor(labels).long(),
                           label_smoothing=smoothing)
    loss.backward(torch.tensor(grad_loss))
    fn = Fn()
    al, ay, ag = fn.arg(logits.shape), fn.arg((n,), label_type), fn.arg(())
    attrs = {"label_smoothing": smoothing}
    lo = fn.op("softmax_cross_entropy", [al, ay], attrs, [()])
    g = fn.op("softmax_cross_entropy_grad", [al, ay, ag], attrs, [(n, c)])
    ol, og = run(fn, [lo, g], [logits, labels, grad_loss])
    assert ol.shape == ()
    assert_close(ol, loss, TOL, "loss")
    assert_close(og, tl.grad, TOL, "grad")


# --------------------------------------------------------------------------
# Optimizers: three steps each, state carried between runs
# --------------------------------------------------------------------------

SGD_CASES = [
    dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False),
    dict(momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False),
    dict(momentum=0.9, dampening=0.0, weight_decay=5e-4, nesterov=True),
    dict(momentum=0.8, dampening=0.3, weight_decay=1e-2, nesterov=False),
]


@pytest.mark.parametrize("cfg", SGD_CASES)
def test_sgd_update_three_steps(cfg):
    shape, lr = (4, 3, 3, 3), 0.05
    p0 = rnd(*shape, seed=37)
    tp = torch.nn.Parameter(torch.tensor(p0))
    opt = torch.optim.SGD([tp], lr=lr, **cfg)
    fn = Fn()
    ap, ag, ab, alr, ast = (fn.arg(shape), fn.arg(shape), fn.arg(shape),
                            fn.arg(()), fn.arg(()))
    np_, nb = fn.op("sgd_update", [ap, ag, ab, alr, ast],
                    {"momentum": cfg["momentum"],
                     "dampening": cfg["dampening"],
                     "weight_decay": cfg["weight_decay"],
                     "nesterov": cfg["nesterov"]}, [shape, shape])
    p, buf = p0, np.zeros(shape, np.float32)
    for step in range(1, 4):
        g = rnd(*shape, seed=100 + step)
        tp.grad = torch.tensor(g)
        opt.step()
        p, buf = run(fn, [np_, nb],
                     [p, g, buf, np.array(lr, np.float32),
                      np.array(step, np.float32)])
        assert_close(p, tp, TOL, f"param after step {step}")
        if cfg["momentum"]:
            assert_close(buf, opt.state[tp]["momentum_buffer"], TOL,
                         f"momentum buffer after step {step}")


ADAM_CASES = [
    dict(decoupled=False, weight_decay=0.0),
    dict(decoupled=False, weight_decay=1e-2),
    dict(decoupled=True, weight_decay=1e-2),
]


@pytest.mark.parametrize("cfg", ADAM_CASES)
def test_adam_update_three_steps(cfg):
    shape, lr, betas, eps = (5, 7), 1e-2, (0.9, 0.999), 1e-8
    p0 = rnd(*shape, seed=38)
    tp = torch.nn.Parameter(torch.tensor(p0))
    cls = torch.optim.AdamW if cfg["decoupled"] else torch.optim.Adam
    opt = cls([tp], lr=lr, betas=betas, eps=eps,
              weight_decay=cfg["weight_decay"])
    fn = Fn()
    ap, ag, am, av, alr, ast = (fn.arg(shape), fn.arg(shape), fn.arg(shape),
                                fn.arg(shape), fn.arg(()), fn.arg(()))
    outs = fn.op("adam_update", [ap, ag, am, av, alr, ast],
                 {"beta1": betas[0], "beta2": betas[1], "epsilon": eps,
                  "weight_decay": cfg["weight_decay"],
                  "decoupled": cfg["decoupled"]}, [shape] * 3)
    p, m, v = p0, np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    for step in range(1, 4):
        g = rnd(*shape, seed=200 + step)
        tp.grad = torch.tensor(g)
        opt.step()
        p, m, v = run(fn, outs, [p, g, m, v, np.array(lr, np.float32),
                                 np.array(step, np.float32)])
        st = opt.state[tp]
        assert_close(p, tp, TOL, f"param after step {step}")
        assert_close(m, st["exp_avg"], TOL, f"exp_avg after step {step}")
        assert_close(v, st["exp_avg_sq"], TOL, f"exp_avg_sq after step {step}")


# --------------------------------------------------------------------------
# Constants and f16 arithmetic
# --------------------------------------------------------------------------

def test_constant_and_f16_ops():
    x = rnd(2, 3, seed=39, lo=-4, hi=4)
    fn = Fn()
    ax = fn.arg(x.shape)
    k = fn.constant("dense<[[1.5, -2.0, 0.1], [3.0, 0.0, 7.25]]>", (2, 3))
    h = fn.op("cast", [ax], None, [x.shape], dtype="f16")
    kh = fn.op("cast", [k], None, [x.shape], dtype="f16")
    s = fn.op("mul", [h, kh])
    r = fn.op("relu", [s])
    o = run(fn, [k, r], [x])
    assert_close(o[0], np.array([[1.5, -2.0, 0.1], [3.0, 0.0, 7.25]],
                                np.float32), 0, "constant")
    th = torch.tensor(x).half()
    want = F.relu((th.float() * torch.tensor(o[0]).half().float()).half()
                  .float()).half()
    np.testing.assert_array_equal(o[1], want.numpy())
