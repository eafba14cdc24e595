"""Pipeline stages on the CPU reference interpreter (issue 38,
docs/pipeline-parallel.md): `cnnc --train --run-reference --pipeline-stages S
--micro-batches M` trains on M micro-batches of the model's batch per step
and must give what the unpartitioned step with `--accumulate M` gives over
the same micro-batches, bitwise (the same f32 ops in the same order): every
parameter, optimizer state and BatchNorm running statistic after the run, and
each step's loss equal to the mean of its M micro-steps' losses."""
import os
import re
import shutil
import subprocess
import sys

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

sys.path.insert(0, os.path.join(REPO, "bench", "dp"))
import pipeline_model  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

B = 2      # the micro-batch
M = 4      # micro-batches per step
STEPS = 2  # pipelined steps (2 x M micro-steps of --accumulate)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return pm.make_digits(tmp_path_factory, "pp")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return {name: pm.export(tmp_path_factory, name, B, model, prefix="pp")
            for name, model in (("simplecnn", tc.make_model("simplecnn", seed=0)),
                                ("smallbn", pm.SmallBN()),
                                ("deepbn", pm.DeepBN()),
                                ("deepchain", pm.DeepBN(skips=False)),
                                ("unet", _unet()))}


def _unet():
    """test_resize.py's U-Net/FPN (BatchNorm, max-pool, a bilinear
    upsampling into a concatenation with a skip, a nearest FPN addition, a
    long residual skip from the first block to the last)."""
    import test_resize
    torch.manual_seed(0)
    return test_resize.UNetFPN()


def train(cnnc, model, data, out, steps, *extra):
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", steps,
                    "--data", data, "--seed", 3, "--save-state", out,
                    "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    steps_seen = [(int(i), float(v)) for i, v in tc.STEP_RE.findall(r.stdout)]
    assert [i for i, _ in steps_seen] == list(range(1, steps + 1)), r.stdout
    return r, np.array([v for _, v in steps_seen], np.float64)


def train_both(cnnc, model, digits, tmp_path, *pipeline):
    """`--accumulate M` over STEPS x M micro-batches and the pipelined step
    (`pipeline`: its flags) over STEPS steps of the same data; asserts each
    pipelined loss is the mean of its M micro-steps' and every initializer
    bitwise equal. Returns the pipelined run, the names and its weights."""
    acc, acc_losses = train(cnnc, model, digits, tmp_path / "acc.cnnw", STEPS * M,
                            "--accumulate", M)
    pp, pp_losses = train(cnnc, model, digits, tmp_path / "pp.cnnw", STEPS,
                          "--micro-batches", M, *pipeline)
    # A pipelined step reports the mean of its micro-batches' losses.
    np.testing.assert_allclose(pp_losses, acc_losses.reshape(STEPS, M).mean(axis=1),
                               rtol=1e-5)
    a, p = read_cnnw(str(tmp_path / "acc.cnnw")), read_cnnw(str(tmp_path / "pp.cnnw"))
    names = [n for n in tc.onnx_initializers(model).keys() if "num_batches" not in n]
    assert names and all(n in p for n in names), sorted(p)
    for n in names:
        np.testing.assert_array_equal(np.asarray(p[n]), np.asarray(a[n]), err_msg=n)
    return pp, names, p


# Each stage's unrolled step (cnn-pipeline-schedule) runs on a thread of its
# own; GPipe on two stages, 1F1B on four (where the warm-up differs per
# stage). unittests/Reference/PipelineTest.cpp covers the other pairs.
@pytest.mark.parametrize("stages,schedule", [(2, "gpipe"), (4, "1f1b")])
@pytest.mark.parametrize("name", ["simplecnn", "smallbn"])
def test_pipeline_equals_accumulation(cnnc, models, digits, tmp_path, name, stages,
                                      schedule):
    model = models[name]
    pp, names, p = train_both(cnnc, model, digits, tmp_path, "--pipeline-stages", stages,
                              "--pipeline-schedule", schedule)
    assert "pipeline plan: %d stage(s) x %d micro-batch(es)" % (stages, M) in pp.stdout, pp.stdout
    # The run trained: the weights moved from the exported ones.
    init = tc.onnx_initializers(model)
    assert any(np.any(np.asarray(p[n]) != np.asarray(init[n])) for n in names)


# DeepBN: seven layers with parameters, BatchNorm, residuals and a skip
# across several cuts. On 3 stages a BatchNorm's forward value that only the
# next stage's backward pass reads crosses a cut: it used to be received in
# that backward pass, after the next micro-batch's activation that was sent
# after it (NCCL pairs by order; cnn-pipeline-schedule now receives in the
# sender's order and checks every link). Its skip crosses several cuts: the
# stages between relay it (cnn-pipeline-split), plain and interleaved (3
# stages x 2 chunks: through every virtual stage between); the chain form
# without the skip as well.
@pytest.mark.parametrize("name,stages,chunks", [("deepbn", 3, 1), ("deepchain", 3, 2),
                                                ("deepbn", 3, 2), ("deepbn", 2, 2)])
def test_pipeline_deep_equals_accumulation(cnnc, models, digits, tmp_path, name, stages,
                                           chunks):
    model = models[name]
    pp, _, _ = train_both(cnnc, model, digits, tmp_path, "--pipeline-stages", stages,
                          "--pipeline-chunks", chunks)
    if chunks > 1:
        assert "pipeline plan: %d stage(s) x 2 chunks = %d virtual stages" % (
            stages, 2 * stages) in pp.stdout, pp.stdout
        assert "virtual stage %d (stage 0, chunk 1)" % stages in pp.stdout, pp.stdout


def test_pipeline_chunks_flag_errors(cnnc, models):
    model = models["deepbn"]
    for extra, msg in (
            (("--pipeline-stages", 1, "--pipeline-chunks", 2),
             "--pipeline-chunks 2 (interleaved stages) needs --pipeline-stages S >= 2 "
             "and --pipeline-schedule gpipe"),
            (("--pipeline-stages", 3, "--pipeline-chunks", 2, "--pipeline-schedule", "1f1b"),
             "--pipeline-chunks 2 (interleaved stages) needs --pipeline-stages S >= 2"),
            (("--pipeline-stages", 3, "--pipeline-chunks", 0),
             "--pipeline-chunks 0 is not a positive count"),
            (("--pipeline-chunks", 2,),
             "--pipeline-chunks 2 (interleaved stages) needs --pipeline-stages S >= 2"),
            (("--pipeline-stages", 3, "--pipeline-chunks", 8),
             "24 virtual stages (3 stages x 8 chunks) but @train_step has 15 forward ops")):
        r = tc.run_cnnc(cnnc, models["simplecnn"] if "8" in map(str, extra) else model,
                        "--train", "--run-reference", "--steps", 1,
                        "--data", "synthetic", "--micro-batches", 4, *extra)
        assert r.returncode != 0, extra
        assert msg in r.stderr, (extra, r.stderr)
        assert "Stack dump" not in r.stderr, r.stderr
    # The CUDA target: interleaved stages need the asynchronous transfers
    # (on the compute stream the loop deadlocks); counts that overflow.
    for extra, msg in (
            (("--pipeline-chunks", 2, "--pipeline-async-transfers=false"),
             "--pipeline-chunks 2 needs the asynchronous transfers on the GPU"),
            (("--pipeline-chunks", 4611686018427387904),
             "3 stages x 4611686018427387904 chunks overflow a count")):
        r = tc.run_cnnc(cnnc, models["deepchain"], "--train", "--pipeline-stages", 3,
                        "--micro-batches", 4, *extra, "--emit", "cuda", "-o", "/dev/null")
        assert r.returncode != 0, extra
        assert msg in r.stderr, (extra, r.stderr)
        assert "Stack dump" not in r.stderr, r.stderr


def test_pipeline_cuda_interleaved_source(cnnc, models, tmp_path):
    """Interleaved stages on the CUDA target (the CUDA text, no nvcc): every
    stage links to the first and the last (prepareTransfers' wrapLink), the
    transfers are asynchronous, and per pair of stages the bytes one sends
    are the bytes the other receives, in the same order."""
    out = tmp_path / "il.cu"
    r = tc.run_cnnc(cnnc, models["deepchain"], "--train", "--pipeline-stages", 3,
                    "--pipeline-chunks", 2, "--micro-batches", M, "--emit", "cuda",
                    "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    stages = out.read_text().split("namespace cnnc_stage")
    texts = [stages[1], stages[3], stages[5]]  # each namespace opens and closes
    assert all(re.search(r"dist::prepareTransfers\(ctx, \d+, /\*wrapLink=\*/true\)", t)
               for t in texts)
    pattern = r"dist::(send|recv)Async\(ctx, A \+ \d+, (\d+)ull, (\d+),"
    moves = [re.findall(pattern, t) for t in texts]
    assert all(moves)
    # Stage 0 receives from stage 2 over the wrap (chunk 1's input).
    assert any(kind == "recv" and peer == "2" for kind, _, peer in moves[0])
    for a in range(3):
        for b in range(3):
            if a == b:
                continue
            sent = [n for kind, n, peer in moves[a] if kind == "send" and int(peer) == b]
            got = [n for kind, n, peer in moves[b] if kind == "recv" and int(peer) == a]
            assert sent == got, (a, b)
    assert "dist::send(" not in out.read_text()
    # cnn-pipeline-stage's decision (cnn.step_uncaptured): every stage's
    # ModelSpec tells the runtime not to capture the step into a CUDA graph
    # (its replays hung on H200s, session 35), and why.
    for t in texts:
        spec = re.search(r"static const cnnrt::ModelSpec kModel = \{.*\};", t)
        assert spec, t[-2000:]
        assert spec.group(0).endswith(
            ", &cnnrt::dist::kHooks, -100ll, false, \"interleaved pipeline stages "
            "(--pipeline-chunks 2) need their transfers to run beside the step's "
            "kernels, which a CUDA graph's replay does not promise (ResNet-50 hung "
            "in it); uncaptured, each step's launches cost host time (ResNet-50 "
            "f16 S=2: 2.8x slower than --pipeline-chunks 1)\"};"), spec.group(0)


def test_pipeline_flag_errors(cnnc, models):
    model = models["simplecnn"]
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", 1,
                    "--data", "synthetic", "--micro-batches", 4)
    assert r.returncode != 0
    assert "--micro-batches splits the batch of pipeline stages: give --pipeline-stages S too" in r.stderr, r.stderr
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", 1,
                    "--data", "synthetic", "--pipeline-stages", 2, "--micro-batches", 4,
                    "--accumulate", 2)
    assert r.returncode != 0
    assert "--accumulate 2 with pipeline stages" in r.stderr, r.stderr
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", 1,
                    "--data", "synthetic", "--pipeline-stages", 2, "--micro-batches", 4,
                    "--pipeline-schedule", "interleaved")
    assert r.returncode != 0
    assert "--pipeline-schedule must be gpipe or 1f1b, got 'interleaved'" in r.stderr, r.stderr
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", 1,
                    "--data", "synthetic", "--pipeline-schedule", "1f1b")
    assert r.returncode != 0
    assert "--pipeline-schedule orders the micro-batches of pipeline stages: give " \
        "--pipeline-stages S too" in r.stderr, r.stderr
    # Either value of --pipeline-sends-first without stages: one error naming it.
    for value in ("true", "false"):
        r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", 1,
                        "--data", "synthetic", "--pipeline-sends-first=" + value)
        assert r.returncode != 0
        assert "--pipeline-sends-first orders the functions of pipeline stages: give " \
            "--pipeline-stages S too" in r.stderr, r.stderr


def test_pipeline_memory_budget(cnnc, models, digits, tmp_path):
    """--pipeline-memory-mb without --pipeline-stages: the fewest stages whose
    peaks fit (SimpleCNN needs 4.3 MiB on one stage at M = 4, so 4 MiB takes
    two), still equal to --accumulate 4; a budget below its largest layer (fc1:
    3 MiB of parameters and state) is one error naming it."""
    model = models["simplecnn"]
    acc, acc_losses = train(cnnc, model, digits, tmp_path / "acc.cnnw", M, "--accumulate", M)
    pp, pp_losses = train(cnnc, model, digits, tmp_path / "pp.cnnw", 1,
                          "--pipeline-memory-mb", 4, "--micro-batches", M)
    assert "pipeline plan: 2 stage(s) x %d micro-batch(es)" % M in pp.stdout, pp.stdout
    assert "device memory 4.00 MiB" in pp.stdout, pp.stdout
    np.testing.assert_allclose(pp_losses, acc_losses.reshape(1, M).mean(axis=1), rtol=1e-5)
    a, p = read_cnnw(str(tmp_path / "acc.cnnw")), read_cnnw(str(tmp_path / "pp.cnnw"))
    for n in tc.onnx_initializers(model):
        np.testing.assert_array_equal(np.asarray(p[n]), np.asarray(a[n]), err_msg=n)
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", 1,
                    "--data", "synthetic", "--pipeline-memory-mb", 1, "--micro-batches", M)
    assert r.returncode != 0
    assert "/fc1/Gemm: error: cnn-pipeline-partition: this layer alone needs" in r.stderr, r.stderr
    assert "over device-memory-bytes 1048576: no cut can fit it" in r.stderr, r.stderr


NVCC = os.path.exists("/usr/local/cuda/bin/nvcc") or shutil.which("nvcc")


def test_pipeline_cuda_refusals(cnnc, models, tmp_path):
    """What the CUDA target's pipeline stages do not run is one error naming
    it, before anything is compiled: sync-bn. (--emit lib builds the
    stages' library: test_python_pipeline_stage_library_builds.)"""
    model = models["simplecnn"]
    base = ("--train", "--pipeline-stages", 2, "--micro-batches", 4)
    r = tc.run_cnnc(cnnc, model, *base, "--gpus", 2, "--sync-bn", "-o", tmp_path / "b.cu")
    assert r.returncode != 0
    assert "--sync-bn with pipeline stages is not built" in r.stderr, r.stderr
    assert not (tmp_path / "b.cu").exists()


def test_pipeline_cuda_1f1b_source(cnnc, models, tmp_path):
    """--pipeline-schedule 1f1b on the CUDA target (the CUDA text, no nvcc):
    every transfer of the two stages is in an NCCL group or alone, and the
    groups pair up: stage 0 sends 4 activations and receives 4 gradients,
    stage 1 the other way round, each in its schedule's order."""
    out = tmp_path / "train.cu"
    r = tc.run_cnnc(cnnc, models["simplecnn"], "--train", "--pipeline-stages", 2,
                    "--micro-batches", M, "--pipeline-schedule", "1f1b", "--emit", "cuda",
                    "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pipeline plan: 2 stage(s) x 4 micro-batch(es)" in r.stdout, r.stdout
    stages = out.read_text().split("namespace cnnc_stage")
    s0, s1 = stages[1], stages[3]
    for s, sends, recvs in ((s0, 1, 1), (s1, 0, 0)):
        assert len(re.findall(r"dist::send\(ctx, A \+ \d+, \d+ull, %d," % sends, s)) == M
        assert len(re.findall(r"dist::recv\(ctx, A \+ \d+, \d+ull, %d," % recvs, s)) == M
        assert s.count("dist::groupStart(ctx);") == s.count("dist::groupEnd(ctx);") == 3


def test_pipeline_cuda_fp32_source(cnnc, models, tmp_path):
    """--precision fp32 stages (no nvcc: the CUDA text): no loss scale, no
    collective but the transfers, f32 activations across the cut (the f16
    default is built by test_pipeline_cuda_executable_builds)."""
    out = tmp_path / "train32.cu"
    r = tc.run_cnnc(cnnc, models["simplecnn"], "--train", "--precision", "fp32",
                    "--pipeline-stages", 2, "--micro-batches", M, "--emit", "cuda",
                    "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    cu = out.read_text()
    assert "Role::LossScale" not in cu and "dist::allReduce" not in cu
    f32_bytes = re.findall(r"dist::send(?:Async)?\(ctx, A \+ \d+, (\d+)ull", cu)
    plan32 = r.stdout
    r = tc.run_cnnc(cnnc, models["simplecnn"], "--train", "--pipeline-stages", 2,
                    "--micro-batches", M, "--emit", "cuda", "-o", tmp_path / "train16.cu")
    assert r.returncode == 0, r.stdout + r.stderr
    f16_bytes = re.findall(r"dist::send(?:Async)?\(ctx, A \+ \d+, (\d+)ull",
                           (tmp_path / "train16.cu").read_text())
    # Each plan prints the bytes its cut sends (both directions: the stages'
    # sends per micro-batch together): f32 tensors in the f32 step, f16 ones
    # in the f16 step (its cost model times the f16 step, so its cut may
    # differ).
    def cut_bytes(plan):
        m = re.search(r"cut 0\|1 after forward op \d+: \d+ tensor\(s\), (\d+) bytes", plan)
        assert m, plan
        return int(m.group(1))
    assert len(f32_bytes) == len(f16_bytes) == 2 * M
    assert sum(map(int, f32_bytes)) == M * cut_bytes(plan32)
    assert sum(map(int, f16_bytes)) == M * cut_bytes(r.stdout)


@pytest.mark.skipif(not NVCC, reason="nvcc not installed")
def test_pipeline_cuda_executable_builds(cnnc, models, tmp_path):
    """`cnnc --train --pipeline-stages 2 --micro-batches 4 -o train` for the
    CUDA target (fp16, its default): one executable holding both stages' steps, built by nvcc
    here (no GPU needed; docs/pipeline-parallel.md). Each stage's step cuts
    its 4 micro-batches out of the 4 x B batch and moves the cut's
    activations forward and their gradients backward through NCCL, 4 each
    way, in the stages' matching order; only the last stage has the loss.
    The executable refuses a GPU count other than its stage count before it
    looks for a GPU."""
    model = models["simplecnn"]
    exe = tmp_path / "train"
    r = tc.run_cnnc(cnnc, model, "--train", "--pipeline-stages", 2,
                    "--micro-batches", M, "-o", exe)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pipeline plan: 2 stage(s) x 4 micro-batch(es) (memory as GPipe keeps it)" in r.stdout, r.stdout
    cu = (tmp_path / "train.cu").read_text()
    stages = cu.split("namespace cnnc_stage")
    assert len(stages) == 1 + 2 * 2, "two stages, each opened and closed"
    s0, s1 = stages[1], stages[3]
    # Stage 0 sends to 1 and receives from it; stage 1 the other way round,
    # each on the link's stream (cnn-pipeline-async-transfers), waited for
    # once each.
    assert len(re.findall(r"cnnrt::dist::sendAsync\(ctx, A \+ \d+, \d+ull, 1,", s0)) == M
    assert len(re.findall(r"cnnrt::dist::recvAsync\(ctx, A \+ \d+, \d+ull, 1,", s0)) == M
    assert len(re.findall(r"cnnrt::dist::recvAsync\(ctx, A \+ \d+, \d+ull, 0,", s1)) == M
    assert len(re.findall(r"cnnrt::dist::sendAsync\(ctx, A \+ \d+, \d+ull, 0,", s1)) == M
    for s in (s0, s1):
        assert "cnnrt::dist::prepare(ctx, 0)" in s
        assert "cnnrt::dist::prepareTransfers(ctx, %d);" % (2 * M) in s
        assert sorted(map(int, re.findall(r"dist::transferWait\(ctx, (\d+)\);", s))) == \
            list(range(2 * M))
        assert "dist::send(" not in s and "dist::recv(" not in s
        assert len(re.findall(r"// micro-batch \d of 4: rows", s)) == M
        # The spec: the M x B batch, 10 classes, the stage hooks.
        assert re.search(r"kModel = \{.*, %d, 3, 32, 32, 10, prepareModel, trainStep, "
                         r"nullptr, .*&cnnrt::dist::kHooks\};" % (M * B), s), s[-600:]
    assert "cnnrt::Role::Loss}" not in s0 and "cnnrt::Role::Loss}" in s1
    # fp16 (the default): both stages keep a loss scale, and each takes the
    # minimum of its finite flag over the stages (one 1-element f32
    # all-reduce, op 3 = min) before its scale update and optimizer.
    for s in (s0, s1):
        assert "cnnrt::Role::LossScale}" in s
        assert len(re.findall(r"cnnrt::dist::allReduceAcrossStages\(ctx, A \+ \d+, 1ull, 0, 3,",
                              s)) == 1
        assert "dist::allReduce(" not in s
        assert s.index("dist::allReduceAcrossStages") < s.index("lossScaleUpdate<<<")
    # The sends of one stage and the receives of the other carry the same bytes.
    sent = re.findall(r"dist::send(?:Async)?\(ctx, A \+ \d+, (\d+)ull", s0)
    got = re.findall(r"dist::recv(?:Async)?\(ctx, A \+ \d+, (\d+)ull", s1)
    assert sent == got, (sent, got)
    assert "return cnnrt::trainPipelineMain(argc, argv, kStages, 2);" in cu
    assert os.access(exe, os.X_OK)
    r = subprocess.run([str(exe), "--data", "synthetic", "--gpus", "3"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--gpus 3: this step has 2 pipeline stages, one per GPU" in r.stderr, r.stderr


@pytest.mark.skipif(not NVCC, reason="nvcc not installed")
def test_pipeline_cuda_executable_builds_dp(cnnc, models, tmp_path):
    """Pipeline x data parallel (`--pipeline-stages 2 --gpus 2`, fp16): one
    executable for 2 stages x 2 replicas (4 processes, rank = replica x 2 +
    stage). Each stage averages its own gradients over its replicas (the
    ordinary all-reduce buckets) and takes the loss-scale flag's minimum
    over the stages (allReduceAcrossStages, once); only the last stage
    averages the loss. Its stages keep the transfers of the pipeline without
    replicas. The executable refuses a GPU count other than 4 before it
    looks for a GPU. (Named so that the ASan stage's -k
    pipeline_cuda_executable_builds deselects it: build-san has no CUDA
    runtime.)"""
    model = models["simplecnn"]
    exe = tmp_path / "train"
    r = tc.run_cnnc(cnnc, model, "--train", "--pipeline-stages", 2, "--micro-batches", M,
                    "--gpus", 2, "-o", exe)
    assert r.returncode == 0, r.stdout + r.stderr
    cu = (tmp_path / "train.cu").read_text()
    stages = cu.split("namespace cnnc_stage")
    assert len(stages) == 1 + 2 * 2
    s0, s1 = stages[1], stages[3]
    for s in (s0, s1):
        assert len(re.findall(r"dist::allReduceAcrossStages\(ctx, A \+ \d+, 1ull, 0, 3,", s)) == 1
        # Gradients: averaged (op 0) over the replicas, before the flag.
        grads = [m.start() for m in re.finditer(r"dist::allReduce\(ctx, A \+ \d+, \d+ull, \d, 0, "
                                                r"\"all_reduce\.bucket", s)]
        assert grads and max(grads) < s.index("allReduceAcrossStages")
        assert len(re.findall(r"cnnrt::dist::(?:send|recv)Async\(ctx", s)) == 2 * M
    assert '"all_reduce.loss"' not in s0 and '"all_reduce.loss"' in s1
    # Each stage's bucket count before its own code (the two differ).
    counts = re.findall(r"#undef CNNC_NUM_BUCKETS\n.*\n#define CNNC_NUM_BUCKETS (\d+)\n"
                        r"namespace cnnc_stage(\d)", cu)
    assert [s for _, s in counts] == ["0", "1"], counts
    assert "return cnnrt::trainPipelineMain(argc, argv, kStages, 2, 2);" in cu
    r = subprocess.run([str(exe), "--data", "synthetic", "--gpus", "2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("--gpus 2: this step has 2 pipeline stages x 2 data-parallel replicas = 4 GPUs "
            "(compiled with cnnc --pipeline-stages 2 --gpus 2)") in r.stderr, r.stderr


def _torch_step_inputs(seed, batch):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 3, 32, 32, generator=g),
            torch.randint(0, 10, (batch,), generator=g))


def test_python_pipeline_option_errors(monkeypatch):
    """cnnc.compile's pipeline options: each bad value or combination is one
    error naming it, before anything is exported or compiled."""
    import cnnc
    model = tc.make_model("simplecnn", seed=0)
    x = torch.randn(M * B, 3, 32, 32)
    cases = [
        (dict(micro_batches=4), ValueError,
         r"micro_batches=4 splits the batch of pipeline stages: give pipeline_stages too"),
        (dict(pipeline_stages=1, micro_batches=4), ValueError,
         r"pipeline_stages must be an int >= 2, got 1"),
        (dict(pipeline_stages=2, micro_batches=0), ValueError,
         r"micro_batches must be an int >= 1, got 0"),
        (dict(pipeline_stages=2), ValueError, r"pipeline_stages=2 needs micro_batches=M"),
        (dict(pipeline_schedule="1f1b"), ValueError,
         r"pipeline_schedule='1f1b' orders the micro-batches of pipeline stages"),
        (dict(pipeline_stages=2, micro_batches=4, pipeline_schedule="zigzag"), ValueError,
         r"pipeline_schedule must be 'gpipe' or '1f1b', got 'zigzag'"),
        (dict(pipeline_stages=2, micro_batches=4, accumulate=2), ValueError,
         r"accumulate=2 with pipeline_stages: the 4 micro-batches are the accumulation's"),
        (dict(pipeline_stages=2, micro_batches=3), ValueError,
         r"the example batch of 8 does not split into micro_batches=3"),
        (dict(pipeline_chunks=2), ValueError,
         r"pipeline_chunks=2 interleaves pipeline stages: give pipeline_stages too"),
        (dict(pipeline_stages=2, micro_batches=4, pipeline_chunks=2, pipeline_schedule="1f1b"),
         ValueError, r"pipeline_chunks=2 \(interleaved stages\) needs the 'gpipe' schedule, "
         r"got '1f1b'"),
        (dict(pipeline_stages=3, micro_batches=4, pipeline_chunks=0), ValueError,
         r"pipeline_chunks must be an int >= 1, got 0"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            cnnc.compile(model, x, device="cpu", **kwargs)
    # The CPU runs every stage in this process: a launcher's world is refused.
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(cnnc.CompileError, match=r"pipeline_stages=2 on the CPU reference "
                                                r"interpreter runs every stage in this one "
                                                r"process .* started 2 processes"):
        cnnc.compile(model, x, device="cpu", pipeline_stages=2, micro_batches=4)


def test_python_pipeline_gpu_placement():
    """On the GPU one process runs one stage: rank = replica x S + stage
    (the executable's layout); a world that is no multiple of S, or one
    process alone, is one error saying how to launch it."""
    import cnnc
    from cnnc import pipeline
    plan = pipeline.check_options(2, 4, None, 1)
    assert plan == pipeline.Plan(2, 4, "gpipe", None, None, None)
    old = os.environ.get("RANK")
    try:
        for rank, world, want in ((0, 2, (0, 0, 1)), (1, 2, (1, 0, 1)), (3, 4, (1, 1, 2)),
                                  (2, 4, (0, 1, 2))):
            os.environ["RANK"] = str(rank)
            p = pipeline.place(plan, world, "cuda", cnnc.CompileError)
            assert (p.stage, p.replica, p.replicas) == want, (rank, world, p)
        for world in (1, 3):
            with pytest.raises(cnnc.CompileError,
                               match=r"pipeline_stages=2 on the GPU runs one process per "
                                     r"stage and GPU: launch the script under torchrun "
                                     r"--nproc-per-node 2"):
                pipeline.place(plan, world, "cuda", cnnc.CompileError)
    finally:
        if old is None:
            os.environ.pop("RANK", None)
        else:
            os.environ["RANK"] = old
    assert pipeline.cnnc_args(plan) == ["--pipeline-stages", "2", "--micro-batches", "4",
                                        "--pipeline-schedule", "gpipe"]


def _bits(t):
    return t.detach().contiguous().numpy().view(np.uint32)


@pytest.mark.parametrize("name,stages,schedule,chunks", [("simplecnn", 2, "gpipe", 1),
                                                         ("smallbn", 2, "1f1b", 1),
                                                         ("deepchain", 3, "gpipe", 2)])
def test_python_pipeline_cpu_equals_accumulation(tmp_path, monkeypatch, name, stages,
                                                 schedule, chunks):
    """cnnc.compile(pipeline_stages=S, micro_batches=4) on the CPU runs the
    split step's stages on threads in this process (the reference
    interpreter's runScheduledPipelineStep) and is bitwise what
    accumulate=4 computes over the same 4 micro-batches: every step's loss
    (the mean of its micro-batches' losses, summed in their order in f32),
    every parameter and BatchNorm statistic, num_batches_tracked (4 per
    step) and the SGD momentum written back by sync_to."""
    import copy
    import cnnc
    monkeypatch.setenv("CNNC_CACHE_DIR", str(tmp_path / "cache"))
    base = {"simplecnn": lambda: tc.make_model("simplecnn", seed=0), "smallbn": pm.SmallBN,
            "deepchain": lambda: pm.DeepBN(skips=False)}[name]()
    piped_model, acc_model = copy.deepcopy(base), copy.deepcopy(base)
    piped_opt = torch.optim.SGD(piped_model.parameters(), lr=0.05, momentum=0.9)
    acc_opt = torch.optim.SGD(acc_model.parameters(), lr=0.05, momentum=0.9)
    piped = cnnc.compile(piped_model, torch.zeros(M * B, 3, 32, 32), optimizer=piped_opt,
                         device="cpu", pipeline_stages=stages, micro_batches=M,
                         pipeline_schedule=schedule,
                         pipeline_chunks=chunks if chunks > 1 else None)
    acc = cnnc.compile(acc_model, torch.zeros(B, 3, 32, 32), optimizer=acc_opt,
                       device="cpu", accumulate=M)
    assert piped.pipeline == cnnc.pipeline.Plan(stages, M, schedule, None, None, None, chunks)
    assert piped.input_shape == (M * B, 3, 32, 32) and piped.labels_shape == (M * B,)
    assert os.path.exists(os.path.join(piped.artifact_dir, "stages.mlir"))
    assert piped.is_last_stage and piped.pipeline_stage is None
    for k in range(STEPS):
        x, y = _torch_step_inputs(k, M * B)
        loss = piped.step(x, y)
        micro = [acc.step(x[m * B:(m + 1) * B], y[m * B:(m + 1) * B]) for m in range(M)]
        mean = np.float32(0)
        for v in micro:
            mean = np.float32(mean + np.float32(v) / np.float32(M))
        assert np.float32(loss) == mean, (k, loss, micro)
    assert piped.steps == acc.steps == STEPS
    sd_p, sd_a = piped.state_dict(), acc.state_dict()
    assert list(sd_p) == list(sd_a)
    for key in sd_a:
        if sd_a[key].is_floating_point():
            assert np.array_equal(_bits(sd_p[key]), _bits(sd_a[key])), key
        else:
            assert int(sd_p[key]) == int(sd_a[key]) == STEPS * M, key
    piped.sync_to(piped_model)
    acc.sync_to(acc_model)
    for (n, p), (_, q) in zip(piped_model.named_parameters(), acc_model.named_parameters()):
        assert np.array_equal(_bits(piped_opt.state[p]["momentum_buffer"]),
                              _bits(acc_opt.state[q]["momentum_buffer"])), n
    with pytest.raises(RuntimeError, match=r"trainer.eval with pipeline_stages=%d: the "
                                           r"pipelined step has no evaluation step" % stages):
        piped.eval(x)
    with pytest.raises(ValueError, match=r"input of shape \(2, 3, 32, 32\), but the step "
                                         r"was compiled for \(8, 3, 32, 32\)"):
        piped.step(x[:B], y[:B])


@pytest.mark.skipif(not NVCC, reason="nvcc not installed")
def test_python_pipeline_stage_library_builds(tmp_path):
    """The GPU path's build (what compile does in each torchrun process):
    `cnnc --emit lib --pipeline-stages 2 --micro-batches 4` with the
    optimizer's flags, through the package's _build: one shared library
    holding both stages' steps and no main, exporting the C API and
    cnnrt_pipeline_stages / _replicas / _stage_spec, which answer 2, 1, two
    distinct specs and NULL outside [0, 2). (Running it needs GPUs:
    test/gpu/check_pipeline_python.py.)"""
    import ctypes
    import cnnc
    from cnnc.tools import find_tool
    rt = os.environ.get("CNNC_RUNTIME_DIR") or os.path.dirname(os.path.dirname(find_tool("cnnc")))
    if not os.path.exists(os.path.join(rt, "lib", "libcnnrt.a")):
        pytest.skip("no libcnnrt.a beside %s (the sanitizer build leaves the CUDA runtime "
                    "out)" % find_tool("cnnc"))
    model = tc.make_model("simplecnn", seed=0)
    flags, _ = cnnc.optimizer_flags(torch.optim.SGD(model.parameters(), lr=0.1,
                                                    momentum=0.9), model)
    flags.update({"label-smoothing": 0.0, "precision": "fp32", "layout": "nhwc",
                  "arch": "sm_90a", "pipeline": [2, M, "gpipe", 1]})
    root = str(tmp_path / "cache")
    os.makedirs(root, exist_ok=True)
    artifact = cnnc.api._build(model, torch.zeros(B, 3, 32, 32), flags, "cuda",
                               find_tool("cnnc"), ["test"], root, verbose=False)
    lib_path = os.path.join(artifact, "libstep.so")
    assert os.path.exists(lib_path) and os.path.exists(lib_path + ".cnnw")
    with open(lib_path + ".cu") as f:
        source = f.read()
    assert "int main(" not in source and "cnnrt_model_spec" not in source
    assert source.count("namespace cnnc_stage") == 4
    lib = ctypes.CDLL(lib_path)
    sig = cnnc.api._cuda_api_signatures(ctypes)
    del sig["cnnrt_model_spec"]
    for name in sig:
        assert hasattr(lib, name), name
    lib.cnnrt_pipeline_stage_spec.restype = ctypes.c_void_p
    assert lib.cnnrt_pipeline_stages() == 2 and lib.cnnrt_pipeline_replicas() == 1
    specs = [lib.cnnrt_pipeline_stage_spec(s) for s in range(-1, 3)]
    assert specs[0] is None and specs[3] is None
    assert specs[1] and specs[2] and specs[1] != specs[2]


def _transfer_groups(stage_text):
    """The NCCL transfers of one stage's emitted step, in issue order: a
    list of groups (dist::groupStart .. groupEnd, else one transfer each),
    each a list of ("S" | "R", peer). An asynchronous transfer (sendAsync,
    recvAsync on its link's stream) is modelled as blocking where it is
    issued: stricter than the link streams, so a step that gets through
    here gets through on the GPU."""
    groups, cur = [], None
    for line in stage_text.splitlines():
        line = line.strip()
        if line.startswith("cnnrt::dist::groupStart("):
            cur = []
        elif line.startswith("cnnrt::dist::groupEnd("):
            groups.append(cur)
            cur = None
        else:
            m = re.match(r"cnnrt::dist::(send|recv)(?:Async)?\(ctx, A \+ \d+, \d+ull, (\d+),",
                         line)
            if m:
                op = ("S" if m.group(1) == "send" else "R", int(m.group(2)))
                if cur is None:
                    groups.append([op])
                else:
                    cur.append(op)
    return groups


def _runs_without_deadlock(stages):
    """Blocking transfers with NCCL group semantics: a stage's group
    completes when every transfer in it meets its counterpart (the n-th send
    from a to b pairs with the n-th receive at b from a) in a group the peer
    has reached; a stage waits at its group until then. True when every
    stage gets through all its groups."""
    numbered = []
    for s, groups in enumerate(stages):
        count, out = {}, []
        for g in groups:
            ng = []
            for kind, peer in g:
                count[(kind, peer)] = count.get((kind, peer), 0) + 1
                ng.append((kind, peer, count[(kind, peer)]))
            out.append(ng)
        numbered.append(out)
    pos = [0] * len(stages)
    while any(pos[s] < len(numbered[s]) for s in range(len(stages))):
        moved = False
        for s, groups in enumerate(numbered):
            if pos[s] >= len(groups):
                continue
            if all(any(("R" if k == "S" else "S", s, n) in g
                       for g in numbered[p][:pos[p] + 1])
                   for k, p, n in groups[pos[s]]):
                pos[s] += 1
                moved = True
        if not moved:
            return False
    return True


def _async_program(stage_text):
    """One stage's emitted step in compute-stream order, as
    bench/dp/pipeline_model.py reads it: ("S"|"R", peer, event, link,
    bytes) where sendAsync / recvAsync issue a transfer with `peer` on the
    stream of the stage's `link` (the compiler's choice: 0 the stage before,
    1 the stage after, 2 the first and the last stage), ("W", event) where
    transferWait makes the compute stream wait for it, ("ops", n) launches
    between."""
    return pipeline_model.parse_stage(stage_text)


def _async_runs_without_deadlock(programs, one_link_per_pair=False):
    """The link streams as the runtime runs them (runtime/src/Nccl.cu;
    bench/dp/pipeline_model.py's model, time aside): a stream per link of a
    stage, as the emitted `link` names it (a stage's link 1 is the next
    stage's link 0; link 2 joins the first and the last), its transfers in
    issue order; `one_link_per_pair`: one stream per pair of stages whatever
    the link (what the runtime did before two interleaved stages got a link
    per direction). The n-th send from a to b and the n-th receive at b from
    a complete together once both are first on their streams (large NCCL
    transfers: neither side buffers); a stage's compute stream stops at a
    wait until that transfer completed. True when every stage gets through
    its step and every transfer completes."""
    return pipeline_model.simulate(programs, op_us=1.0, gbps=100.0, latency_us=0.0,
                                   one_link_per_pair=one_link_per_pair) is not None


def test_async_link_model_sees_deadlocks():
    """The model above: two stages that each send before they receive on
    one link deadlock; receives posted first do not."""
    both_send = [[("S", 1, 0, 1, 64), ("W", 0), ("R", 1, 1, 1, 64), ("W", 1)],
                 [("S", 0, 0, 0, 64), ("W", 0), ("R", 0, 1, 0, 64), ("W", 1)]]
    assert not _async_runs_without_deadlock(both_send)
    ordered = [[("S", 1, 0, 1, 64), ("W", 0), ("R", 1, 1, 1, 64), ("W", 1)],
               [("R", 0, 0, 0, 64), ("W", 0), ("S", 0, 1, 0, 64), ("W", 1)]]
    assert _async_runs_without_deadlock(ordered)
    # Both receives posted ahead, then the sends: on one link per pair a
    # receive heads the stream at both ends and nothing moves; with a link
    # per direction (0 -> 1 on the pair's link, 1 -> 0 on link 2) it runs.
    per_direction = [[("R", 1, 0, 2, 64), ("S", 1, 1, 1, 64), ("W", 1), ("W", 0)],
                     [("R", 0, 0, 0, 64), ("S", 0, 1, 2, 64), ("W", 1), ("W", 0)]]
    assert _async_runs_without_deadlock(per_direction)
    assert not _async_runs_without_deadlock(per_direction, one_link_per_pair=True)


@pytest.mark.parametrize("stages,chunks,micro", [(4, 1, 8), (3, 2, 8), (4, 2, 12),
                                                 (3, 3, 5), (2, 2, 8), (2, 3, 4)])
def test_pipeline_cuda_async_transfers_do_not_deadlock(cnnc, models, tmp_path, stages,
                                                       chunks, micro):
    """GPipe's asynchronous transfers as emitted, through the link-stream
    model: every stage gets through its step. Interleaved stages need the
    receives of the link between the first and the last stage posted ahead
    (the first stage takes chunk 1's inputs only after all M micro-batches
    of chunk 0: with one receive posted at a time the loop deadlocked on 4
    H200s, session 33)."""
    out = tmp_path / "train.cu"
    r = tc.run_cnnc(cnnc, models["deepchain"], "--train", "--pipeline-stages", stages,
                    "--pipeline-chunks", chunks, "--micro-batches", micro,
                    "--emit", "cuda", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    parts = out.read_text().split("namespace cnnc_stage")
    programs = [_async_program(parts[2 * s + 1]) for s in range(stages)]
    assert all(any(op[0] in ("S", "R") for op in prog) for prog in programs), \
        "every stage transfers asynchronously"
    assert _async_runs_without_deadlock(programs)
    links = {(s, op[1]): set() for s, prog in enumerate(programs) for op in prog
             if op[0] in ("S", "R")}
    for s, prog in enumerate(programs):
        for op in prog:
            if op[0] in ("S", "R"):
                links[(s, op[1])].add((op[0], op[3]))
    if stages == 2 and chunks > 1:
        # Two interleaved stages: the compiler gives each direction between
        # the GPUs a link of its own (0 -> 1 on the pair's, 1 -> 0 on link
        # 2); one link for both would deadlock (a receive posted ahead at
        # the head of the stream on both ends).
        assert links[(0, 1)] == {("S", 1), ("R", 2)}, links
        assert links[(1, 0)] == {("R", 0), ("S", 2)}, links
        assert not _async_runs_without_deadlock(programs, one_link_per_pair=True)
    # With every stream of a GPU run one after another in issue order (CUDA
    # serializes streams that share a hardware queue; the blocking model):
    # GPipe still gets through, an interleaved step does not. It needs its
    # link streams to run beside the compute stream, hence the stage
    # processes' CUDA_DEVICE_MAX_CONNECTIONS=32 (runtime/src/TrainMain.cu).
    serialized = [_transfer_groups(parts[2 * s + 1]) for s in range(stages)]
    assert _runs_without_deadlock(serialized) == (chunks == 1)


@pytest.mark.parametrize("chunks", [1, 2])
def test_pipeline_cuda_relays_skips(cnnc, models, tmp_path, chunks):
    """A tensor that skips stages (DeepBN's stem output, read after the last
    layer, and its gradient) is relayed by the stages between: every
    transfer of the emitted step joins neighbouring GPUs (interleaved: or
    the first and the last, the wrap link), the middle stage passes the
    stem's output on, and the step gets through the link-stream model; with
    blocking transfers on the compute stream (plain stages) through the
    blocking model too. Before the relays the CUDA target refused this split
    (the runtime has no link between stages 0 and 2)."""
    S = 3
    variants = [(), ("--pipeline-async-transfers=false",)] if chunks == 1 else [()]
    for extra in variants:
        out = tmp_path / "a.cu"
        r = tc.run_cnnc(cnnc, models["deepbn"], "--train", "--pipeline-stages", S,
                        "--pipeline-chunks", chunks, "--micro-batches", M, *extra,
                        "--emit", "cuda", "-o", out)
        assert r.returncode == 0, (extra, r.stderr)
        parts = out.read_text().split("namespace cnnc_stage")
        texts = [parts[2 * s + 1] for s in range(S)]
        for s, text in enumerate(texts):
            peers = set(int(p) for p in re.findall(
                r"cnnrt::dist::(?:send|recv)(?:Async)?\(ctx, A \+ \d+, \d+ull, (\d+),", text))
            allowed = {s - 1, s + 1} | ({0, S - 1} if chunks > 1 else set())
            assert peers and peers <= allowed, (extra, s, peers)
        if extra:
            assert _runs_without_deadlock([_transfer_groups(t) for t in texts])
        else:
            assert _async_runs_without_deadlock([_async_program(t) for t in texts])


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_cuda_transfers_do_not_deadlock(cnnc, models, tmp_path, schedule):
    """The transfers of 4 stages as emitted (--emit cuda, M = 4), run through
    a model of blocking NCCL sends and receives with group semantics: every
    stage gets through its step. 1F1B needs its groups (cnn.transfers):
    the same transfers one at a time deadlock, which the model must see."""
    out = tmp_path / "train.cu"
    r = tc.run_cnnc(cnnc, models["smallbn"], "--train", "--pipeline-stages", 4,
                    "--micro-batches", M, "--pipeline-schedule", schedule,
                    "--emit", "cuda", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    parts = out.read_text().split("namespace cnnc_stage")
    stages = [_transfer_groups(parts[2 * s + 1]) for s in range(4)]
    assert all(stages), "every stage transfers"
    assert _runs_without_deadlock(stages)
    one_at_a_time = [[[op] for g in groups for op in g] for groups in stages]
    assert _runs_without_deadlock(one_at_a_time) == (schedule == "gpipe")


def test_interleaved_hardware_queues(monkeypatch):
    """cnnc.compile(pipeline_chunks > 1) asks for every CUDA hardware queue
    (CUDA_DEVICE_MAX_CONNECTIONS=32) while CUDA has not started, warns once
    it has, and leaves a caller's setting alone."""
    import types
    from cnnc import pipeline as pl

    def fake(initialized):
        cuda = types.SimpleNamespace(is_available=lambda: True,
                                     is_initialized=lambda: initialized)
        return types.SimpleNamespace(cuda=cuda)

    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    pl.ensure_hardware_queues(fake(False))
    assert os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS")
    with pytest.warns(RuntimeWarning, match="CUDA_DEVICE_MAX_CONNECTIONS=32"):
        pl.ensure_hardware_queues(fake(True))
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in os.environ
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4")
    pl.ensure_hardware_queues(fake(False))
    assert os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] == "4"


def _assert_relayed_cuda_step(plan, cuda_path, stages):
    """A plain pipeline's emitted CUDA step (`cuda_path`, its printed `plan`)
    relays skips: some cut carries more than an activation and its gradient
    (a relayed tensor crosses it too), every stage transfers with its
    neighbours only, and the step gets through the link-stream model."""
    cuts = [int(n) for n in re.findall(r"cut \d+\|\d+ after forward op \d+: (\d+) tensor",
                                       plan)]
    assert len(cuts) == stages - 1 and max(cuts) > 2, plan
    parts = cuda_path.read_text().split("namespace cnnc_stage")
    programs = [_async_program(parts[2 * s + 1]) for s in range(stages)]
    for s, prog in enumerate(programs):
        peers = {op[1] for op in prog if op[0] in ("S", "R")}
        assert peers and peers <= {s - 1, s + 1}, (s, peers)
    assert _async_runs_without_deadlock(programs)


@pytest.mark.parametrize("stages", [3, 4])
def test_pipeline_unet_cut_inside_its_skips(cnnc, models, digits, tmp_path, stages):
    """Issue 38's U-Net, cut inside its skip span: the encoder's outputs that
    the decoder reads (and their gradients) cross several cuts and are
    relayed by the stages between. The pipelined step equals --accumulate 4
    on the reference interpreter (losses, every initializer bitwise), and
    the CUDA step's transfers all join neighbouring stages and run through
    the link-stream model."""
    model = models["unet"]
    train_both(cnnc, model, digits, tmp_path, "--pipeline-stages", stages)
    out = tmp_path / "unet.cu"
    r = tc.run_cnnc(cnnc, model, "--train", "--pipeline-stages", stages,
                    "--micro-batches", M, "--emit", "cuda", "-o", out)
    assert r.returncode == 0, r.stderr
    _assert_relayed_cuda_step(r.stdout, out, stages)


def test_pipeline_unet_over_budget(cnnc, tmp_path):
    """A U-Net (4 levels, BatchNorm, transposed convolutions, concatenated
    skips) over a per-GPU budget it cannot fit in one stage: the plan takes
    3 or more stages, cut inside the skips, and the CUDA step relays them
    (every transfer between neighbouring stages; through the link-stream
    model). Width 64 at 1024 x 1024, micro-batch 4, M = 8 within 79,000 MiB
    a GPU takes 3 stages the same way (compiled, not run on GPUs;
    docs/pipeline-parallel.md)."""
    torch.manual_seed(0)
    onnx_path = tmp_path / "unet.onnx"
    tc.export_training(pm.UNet(w=4), onnx_path, (2, 3, 128, 128))
    out = tmp_path / "unet.cu"
    r = tc.run_cnnc(cnnc, onnx_path, "--train", "--micro-batches", M,
                    "--pipeline-memory-mb", 12, "--emit", "cuda", "-o", out)
    assert r.returncode == 0, r.stderr
    m = re.search(r"pipeline plan: (\d+) stage\(s\)", r.stdout)
    assert m and int(m.group(1)) >= 3, r.stdout
    _assert_relayed_cuda_step(r.stdout, out, int(m.group(1)))


def test_pipeline_cuda_1f1b_refuses_relays(cnnc, models, tmp_path):
    """1F1B's grouped transfers (one NCCL group per run) with a relayed skip
    deadlock in the blocking model (a relay's receive and send to the other
    neighbour share a run its neighbours do not mirror): one error on the
    CUDA target naming the stages and GPipe; without skips 1F1B compiles and
    gets through; the reference interpreter runs the relays under 1F1B."""
    out = tmp_path / "a.cu"
    r = tc.run_cnnc(cnnc, models["deepbn"], "--train", "--pipeline-stages", 3,
                    "--micro-batches", M, "--pipeline-schedule", "1f1b", "--emit", "cuda",
                    "-o", out)
    assert r.returncode != 0
    assert re.search(r"cnn-pipeline-stage: stage 1 relays a tensor from stage \d to stage \d "
                     r"\(tag \d+ to tag \d+: a tensor that skips stages", r.stderr), r.stderr
    assert "use --pipeline-schedule gpipe" in r.stderr and "Stack dump" not in r.stderr
    r = tc.run_cnnc(cnnc, models["deepchain"], "--train", "--pipeline-stages", 3,
                    "--micro-batches", M, "--pipeline-schedule", "1f1b", "--emit", "cuda",
                    "-o", out)
    assert r.returncode == 0, r.stderr
    parts = out.read_text().split("namespace cnnc_stage")
    assert _runs_without_deadlock([_transfer_groups(parts[2 * s + 1]) for s in range(3)])
    r = tc.run_cnnc(cnnc, models["deepbn"], "--train", "--run-reference", "--steps", 1,
                    "--data", "synthetic", "--pipeline-stages", 3, "--micro-batches", M,
                    "--pipeline-schedule", "1f1b")
    assert r.returncode == 0, r.stderr


def test_pipeline_resnet50_plans(cnnc, tmp_path):
    """ResNet-50 f16, S=4, M=16: the plans the GPU runs use (session 36's
    cost-model fixes), checked without a GPU. Every cut of the plain plan
    carries 2 tensors at micro-batches 32 and 64: a block's output after
    its ReLU is read by the next block's convolution and its skip, and comes
    back as two gradients (3 tensors a cut); counting only the activations,
    the model took such cuts at 64 (4,125 us for the slowest stage where
    the 2-tensor cuts give 3,835). Interleaved (2 chunks) at 32 is estimated
    faster than plain: the balancing search also starts from the fastest
    virtual stages' plan (from the fewest-bytes plan alone it reached 45.4
    ms against plain's 43.9)."""
    from cnnc.export import build_model, export_onnx
    onnx = tmp_path / "r50.onnx"
    export_onnx(build_model("resnet50", None, 0), str(onnx), (2, 3, 224, 224), training=True)

    def plan(micro_batch, *extra):
        r = tc.run_cnnc(cnnc, onnx, "--train", "--precision", "fp16", "--optimizer", "sgd",
                        "--lr", "0.01", "--momentum", "0.9", "--batch", micro_batch,
                        "--pipeline-stages", 4, "--micro-batches", 16, *extra,
                        "--emit", "cuda", "-o", tmp_path / "step.cu")
        assert r.returncode == 0, r.stdout + r.stderr
        text = r.stdout + r.stderr
        step = float(re.search(r"estimated step: ([\d.]+) us", text).group(1))
        return step, re.findall(r"cut \d\|\d after forward op \d+: (\d+) tensor", text), text

    for micro_batch in (32, 64):
        _, cuts, text = plan(micro_batch)
        assert cuts == ["2", "2", "2"], text
    plain, _, _ = plan(32)
    interleaved, _, text = plan(32, "--pipeline-chunks", 2)
    assert interleaved < plain, text
