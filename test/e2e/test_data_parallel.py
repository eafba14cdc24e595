"""Data-parallel training on the CPU reference interpreter (`--gpus N` /
`--world-size N` without a GPU: N ranks as threads, cnn.all_reduce through
the in-memory communicator). What a 2-GPU job must do, checked in CI:

* SimpleCNN (no BatchNorm): 2 ranks x batch B give the same losses and the
  same final weights as 1 rank x batch 2B, over 5 steps on the shuffled
  digits (each rank a disjoint half of each global batch), within f32
  tolerance, for SGD with momentum and for Adam; --gpus 1 is the plain run.
* with BatchNorm, the statistics are per rank (DDP's default): 2 x B no
  longer equals 1 x 2B; with --sync-bn (SyncBatchNorm) it does again:
  losses, weights and running statistics.
* f16 (cnn-precision, loss scaling): the f16 gradients are averaged in f16;
  2 x B stays close to 1 x 2B.
* a rank that dies (CNNC_DP_FAIL_RANK/STEP) makes the job exit non-zero
  with a message naming it after the collective timeout, not hang, and no
  state file is written.
"""
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from cnnc import train_check as tc  # noqa: E402
from cnnc.cnnw import read_cnnw  # noqa: E402
import parallel_models as pm  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

B = 4
STEPS = 5


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return pm.make_digits(tmp_path_factory, "dp")


def export(tmp_path_factory, name, batch, model):
    return pm.export(tmp_path_factory, name, batch, model, prefix="dp")


@pytest.fixture(scope="module")
def simplecnn(tmp_path_factory):
    """The same SimpleCNN exported for batch B (a rank) and 2B."""
    return {b: export(tmp_path_factory, "simplecnn", b, tc.make_model("simplecnn", seed=0))
            for b in (B, 2 * B)}


@pytest.fixture(scope="module")
def smallbn(tmp_path_factory):
    return {b: export(tmp_path_factory, "smallbn", b, pm.SmallBN()) for b in (B, 2 * B)}


def train(cnnc, model, data, out, *extra, env=None, timeout=600):
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", STEPS,
                    "--data", data, "--seed", 3, "--save-state", out, *extra,
                    timeout=timeout) if env is None else subprocess.run(
        [str(cnnc), str(model), "--train", "--run-reference", "--steps", str(STEPS),
         "--data", str(data), "--seed", "3", "--save-state", str(out)] +
        [str(e) for e in extra],
        capture_output=True, text=True, timeout=timeout, env=env)
    return r


def losses_of(r):
    assert r.returncode == 0, r.stderr
    steps = [(int(i), float(v)) for i, v in tc.STEP_RE.findall(r.stdout)]
    assert [i for i, _ in steps] == list(range(1, STEPS + 1)), r.stdout
    return np.array([v for _, v in steps])


def params(path, model_onnx):
    state = read_cnnw(str(path))
    names = tc.onnx_initializers(model_onnx).keys()
    return {n: np.asarray(state[n], np.float64) for n in names
            if "running" not in n and "num_batches" not in n}


@pytest.mark.parametrize("opt", [["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
                                 ["--optimizer", "adam", "--lr", "0.001"]],
                         ids=["sgd", "adam"])
def test_two_ranks_equal_one_rank_double_batch(cnnc, simplecnn, digits, tmp_path, opt):
    one = train(cnnc, simplecnn[2 * B], digits, tmp_path / "one.cnnw", *opt)
    two = train(cnnc, simplecnn[B], digits, tmp_path / "two.cnnw", "--gpus", 2, *opt)
    l1, l2 = losses_of(one), losses_of(two)
    print("\nMEASURED losses 1 x %d: %s\nMEASURED losses 2 x %d: %s" % (2 * B, l1, B, l2))
    assert "data parallel: 2 ranks" in two.stdout, two.stdout
    np.testing.assert_allclose(l2, l1, rtol=1e-5, atol=1e-6)
    p1, p2 = params(tmp_path / "one.cnnw", simplecnn[2 * B]), params(tmp_path / "two.cnnw", simplecnn[B])
    assert p1.keys() == p2.keys() and p1
    worst = max(float(np.max(np.abs(p1[k] - p2[k]))) for k in p1)
    print("MEASURED max |w(1x%d) - w(2x%d)| after %d steps: %.3g" % (2 * B, B, STEPS, worst))
    for k in p1:
        np.testing.assert_allclose(p2[k], p1[k], rtol=1e-4, atol=1e-6, err_msg=k)


def test_world_size_one_is_the_plain_run(cnnc, simplecnn, digits, tmp_path):
    plain = losses_of(train(cnnc, simplecnn[B], digits, tmp_path / "a.cnnw"))
    r = train(cnnc, simplecnn[B], digits, tmp_path / "b.cnnw", "--world-size", 1)
    assert "data parallel: 1 rank" in r.stdout, r.stdout
    np.testing.assert_array_equal(losses_of(r), plain)


def test_small_buckets_same_result(cnnc, simplecnn, digits, tmp_path):
    big_run = train(cnnc, simplecnn[B], digits, tmp_path / "a.cnnw", "--gpus", 2)
    big = losses_of(big_run)
    r = train(cnnc, simplecnn[B], digits, tmp_path / "b.cnnw", "--gpus", 2,
              "--bucket-mb", 0)
    # SimpleCNN has 8 gradients: with bucket-mb 0 each is a bucket; the
    # default 25 MiB holds them in two: the buckets are packed from the
    # last gradient back and the last one (its all-reduce cannot overlap
    # the backward pass) holds at most 1 MiB.
    assert "8 gradient bucket(s)" in r.stdout, r.stdout
    assert "2 gradient bucket(s)" in big_run.stdout, big_run.stdout
    np.testing.assert_array_equal(losses_of(r), big)


def test_batchnorm_statistics_are_per_rank(cnnc, smallbn, digits, tmp_path):
    one = losses_of(train(cnnc, smallbn[2 * B], digits, tmp_path / "one.cnnw"))
    two = losses_of(train(cnnc, smallbn[B], digits, tmp_path / "two.cnnw", "--gpus", 2))
    print("\nMEASURED BN losses 1 x %d: %s\nMEASURED BN losses 2 x %d: %s" % (2 * B, one, B, two))
    # Step 1's loss already differs: each rank normalizes with its own half.
    assert abs(two[0] - one[0]) > 1e-4, (one, two)
    assert np.all(np.isfinite(two))


def all_params(path, model_onnx):
    """Every state tensor of the model, the BN running statistics included."""
    state = read_cnnw(str(path))
    names = tc.onnx_initializers(model_onnx).keys()
    return {n: np.asarray(state[n], np.float64) for n in names
            if "num_batches" not in n}


@pytest.mark.parametrize("opt", [["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
                                 ["--optimizer", "adam", "--lr", "0.001"]],
                         ids=["sgd", "adam"])
def test_sync_bn_two_ranks_equal_one_rank_double_batch(cnnc, smallbn, digits, tmp_path, opt):
    """--sync-bn: BatchNorm normalizes with the global batch's statistics and
    its backward with the global sums, so 2 ranks x B compute 1 rank x 2B:
    the losses, the weights and the running statistics (the unbiased
    variance over the global count)."""
    one = train(cnnc, smallbn[2 * B], digits, tmp_path / "one.cnnw", *opt)
    two = train(cnnc, smallbn[B], digits, tmp_path / "two.cnnw", "--gpus", 2, "--sync-bn", *opt)
    l1, l2 = losses_of(one), losses_of(two)
    print("\nMEASURED sync-bn losses 1 x %d: %s\nMEASURED sync-bn losses 2 x %d: %s"
          % (2 * B, l1, B, l2))
    np.testing.assert_allclose(l2, l1, rtol=1e-5, atol=1e-6)
    p1 = all_params(tmp_path / "one.cnnw", smallbn[2 * B])
    p2 = all_params(tmp_path / "two.cnnw", smallbn[B])
    assert p1.keys() == p2.keys() and any("running_var" in k for k in p1), p1.keys()
    # The two exports start from different running statistics (the tracing
    # forward pass of each export updated them with its own dummy batch). The
    # update r' = 0.9 r + 0.1 stat is linear in r: after STEPS steps the
    # initial difference remains, times 0.9^STEPS.
    init1 = tc.onnx_initializers(smallbn[2 * B])
    init2 = tc.onnx_initializers(smallbn[B])
    for k in p1:
        if "running" in k:
            p2[k] -= 0.9 ** STEPS * (np.asarray(init2[k], np.float64) -
                                     np.asarray(init1[k], np.float64))
    # The conv bias in front of BatchNorm has no gradient (BN removes any
    # per-channel shift): its "gradient" is rounding noise, which Adam
    # normalizes to steps of size lr, and the batch mean (so the running
    # mean) moves with that bias. Under Adam these two are not compared.
    if "adam" in opt:
        for k in [k for k in p1 if k.startswith("conv.bias") or k.endswith("running_mean")]:
            del p1[k], p2[k]
    worst = max(float(np.max(np.abs(p1[k] - p2[k]))) for k in p1)
    print("MEASURED sync-bn max |w(1x%d) - w(2x%d)| after %d steps (running stats included): %.3g"
          % (2 * B, B, STEPS, worst))
    for k in p1:
        np.testing.assert_allclose(p2[k], p1[k], rtol=1e-4, atol=1e-6, err_msg=k)


@pytest.fixture(scope="module")
def smallbn16(tmp_path_factory):
    return {b: export(tmp_path_factory, "smallbn", b, pm.SmallBN()) for b in (16, 32)}


def test_sync_bn_f16_close_to_one_rank(cnnc, smallbn16, digits, tmp_path):
    """Under f16 the statistics are still f32 (the activations are cast for
    the reductions): 2 x 16 with --sync-bn gives 1 x 32's losses, which the
    per-rank statistics do not. Only the first two steps are compared: a
    rank's f16 gradients (of the mean over 16, not 32) are twice as large
    under the same initial loss scale, so the 2-rank run skips step 2's
    update for overflow (with or without --sync-bn), which 1 x 32 does not."""
    opt = ["--optimizer", "sgd", "--lr", "0.05", "--precision", "fp16"]
    l1 = losses_of(train(cnnc, smallbn16[32], digits, tmp_path / "one.cnnw", *opt))
    sync = losses_of(train(cnnc, smallbn16[16], digits, tmp_path / "two.cnnw", "--gpus", 2,
                           "--sync-bn", *opt))
    local = losses_of(train(cnnc, smallbn16[16], digits, tmp_path / "loc.cnnw", "--gpus", 2,
                            *opt))
    print("\nMEASURED f16 losses 1 x 32: %s\nMEASURED f16 losses 2 x 16 sync-bn: %s"
          "\nMEASURED f16 losses 2 x 16 per-rank BN: %s" % (l1, sync, local))
    np.testing.assert_allclose(sync[:2], l1[:2], rtol=1e-4)
    assert abs(local[0] - l1[0]) > 1e-3, (local, l1)


def test_sync_bn_nhwc(cnnc, smallbn, digits, tmp_path):
    """The NHWC step (cnn-layout before cnn-data-parallel: the channel is the
    last dimension) synchronizes the same statistics."""
    opt = ["--optimizer", "sgd", "--lr", "0.05"]
    l1 = losses_of(train(cnnc, smallbn[2 * B], digits, tmp_path / "one.cnnw", *opt))
    l2 = losses_of(train(cnnc, smallbn[B], digits, tmp_path / "two.cnnw", "--gpus", 2,
                         "--sync-bn", "--layout", "nhwc", *opt))
    np.testing.assert_allclose(l2, l1, rtol=1e-5, atol=1e-6)


def test_sync_bn_ir_and_flags(cnnc, smallbn, tmp_path):
    """The step holds the BN collectives (forward: the sums; backward: the
    sums of the gradient; one two-vector collective each, reduction sum)
    numbered in issue order with the gradient buckets; --sync-bn without
    --gpus is refused."""
    r = tc.run_cnnc(cnnc, smallbn[B], "--train", "--gpus", 2, "--sync-bn",
                    "--emit", "mlir")
    assert r.returncode == 0, r.stderr
    step = r.stdout[r.stdout.index("@train_step"):]
    assert "cnn.batch_norm_train " not in step and "cnn.batch_norm_grad " not in step
    # 2 BN collectives + 1 gradient bucket + the loss, numbered 0..3 in
    # issue order (bucket 0, the default, is not printed).
    assert step.count("cnn.all_reduce") == 4, step
    assert step.count('reduction = "sum"') == 2, step
    assert "cnn.batch_norm_sums" in step and "cnn.batch_norm_grad_sums" in step
    buckets = [int(b) for b in re.findall(r"bucket = (\d+)", step)]
    assert buckets == [1, 2, 3], buckets
    assert "sync_bn = true" in step
    bad = tc.run_cnnc(cnnc, smallbn[B], "--train", "--sync-bn")
    assert bad.returncode != 0
    assert "--sync-bn synchronizes BatchNorm across data-parallel ranks: give --gpus N" \
        in bad.stderr, bad.stderr


def test_f16_two_ranks_close_to_one_rank(cnnc, simplecnn, digits, tmp_path):
    opt = ["--optimizer", "sgd", "--lr", "0.05", "--precision", "fp16"]
    l1 = losses_of(train(cnnc, simplecnn[2 * B], digits, tmp_path / "one.cnnw", *opt))
    l2 = losses_of(train(cnnc, simplecnn[B], digits, tmp_path / "two.cnnw", "--gpus", 2, *opt))
    print("\nMEASURED f16 losses 1 x %d: %s\nMEASURED f16 losses 2 x %d: %s" % (2 * B, l1, B, l2))
    np.testing.assert_allclose(l2, l1, rtol=2e-2)


def test_dead_rank_stops_the_job(cnnc, simplecnn, digits, tmp_path):
    env = dict(os.environ, CNNC_DP_FAIL_RANK="1", CNNC_DP_FAIL_STEP="2",
               CNNC_DIST_TIMEOUT="2")
    t0 = time.time()
    r = train(cnnc, simplecnn[B], digits, tmp_path / "dead.cnnw", "--gpus", 2,
              env=env, timeout=120)
    took = time.time() - t0
    print("\nMEASURED dead rank: exit %d after %.1f s; stderr:\n%s" % (r.returncode, took, r.stderr))
    assert r.returncode != 0
    assert "timed out after 2 s: rank 1 of 2 never arrived" in r.stderr, r.stderr
    assert "stopped at step 2 of 5: rank 1 died" in r.stderr, r.stderr
    assert "step 1 loss" in r.stdout and "step 2 loss" not in r.stdout, r.stdout
    assert not (tmp_path / "dead.cnnw").exists()
    assert took < 60


def test_bad_world_size(cnnc, simplecnn):
    r = tc.run_cnnc(cnnc, simplecnn[B], "--train", "--gpus", 0)
    assert r.returncode != 0 and "--gpus/--world-size must be >= 1, got 0" in r.stderr
