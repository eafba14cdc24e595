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
                                ("smallbn", pm.SmallBN()))}


def train(cnnc, model, data, out, steps, *extra):
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", steps,
                    "--data", data, "--seed", 3, "--save-state", out,
                    "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    steps_seen = [(int(i), float(v)) for i, v in tc.STEP_RE.findall(r.stdout)]
    assert [i for i, _ in steps_seen] == list(range(1, steps + 1)), r.stdout
    return r, np.array([v for _, v in steps_seen], np.float64)


# Each stage's unrolled step (cnn-pipeline-schedule) runs on a thread of its
# own; GPipe on two stages, 1F1B on four (where the warm-up differs per
# stage). unittests/Reference/PipelineTest.cpp covers the other pairs.
@pytest.mark.parametrize("stages,schedule", [(2, "gpipe"), (4, "1f1b")])
@pytest.mark.parametrize("name", ["simplecnn", "smallbn"])
def test_pipeline_equals_accumulation(cnnc, models, digits, tmp_path, name, stages,
                                      schedule):
    model = models[name]
    acc, acc_losses = train(cnnc, model, digits, tmp_path / "acc.cnnw", STEPS * M,
                            "--accumulate", M)
    pp, pp_losses = train(cnnc, model, digits, tmp_path / "pp.cnnw", STEPS,
                          "--pipeline-stages", stages, "--micro-batches", M,
                          "--pipeline-schedule", schedule)
    assert "pipeline plan: %d stage(s) x %d micro-batch(es)" % (stages, M) in pp.stdout, pp.stdout
    # A pipelined step reports the mean of its micro-batches' losses.
    np.testing.assert_allclose(pp_losses, acc_losses.reshape(STEPS, M).mean(axis=1),
                               rtol=1e-5)
    a, p = read_cnnw(str(tmp_path / "acc.cnnw")), read_cnnw(str(tmp_path / "pp.cnnw"))
    names = [n for n in tc.onnx_initializers(model).keys() if "num_batches" not in n]
    assert names and all(n in p for n in names), sorted(p)
    for n in names:
        np.testing.assert_array_equal(np.asarray(p[n]), np.asarray(a[n]), err_msg=n)
    # The run trained: the weights moved from the exported ones.
    init = tc.onnx_initializers(model)
    assert any(np.any(np.asarray(p[n]) != np.asarray(init[n])) for n in names)


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
    it, before anything is compiled: the C API library, sync-bn."""
    model = models["simplecnn"]
    base = ("--train", "--pipeline-stages", 2, "--micro-batches", 4)
    r = tc.run_cnnc(cnnc, model, *base, "--emit", "lib", "-o", tmp_path / "lib.so")
    assert r.returncode != 0
    assert "--emit lib with --pipeline-stages" in r.stderr, r.stderr
    r = tc.run_cnnc(cnnc, model, *base, "--gpus", 2, "--sync-bn", "-o", tmp_path / "b.cu")
    assert r.returncode != 0
    assert "--sync-bn with pipeline stages is not built" in r.stderr, r.stderr
    assert not (tmp_path / "b.cu").exists() and not (tmp_path / "lib.so").exists()


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
    f32_bytes = re.findall(r"dist::send\(ctx, A \+ \d+, (\d+)ull", cu)
    r = tc.run_cnnc(cnnc, models["simplecnn"], "--train", "--pipeline-stages", 2,
                    "--micro-batches", M, "--emit", "cuda", "-o", tmp_path / "train16.cu")
    assert r.returncode == 0, r.stdout + r.stderr
    f16_bytes = re.findall(r"dist::send\(ctx, A \+ \d+, (\d+)ull",
                           (tmp_path / "train16.cu").read_text())
    # The same transfers, in f16 half the bytes.
    assert len(f32_bytes) == len(f16_bytes) == 2 * M
    assert [int(b) // 2 for b in f32_bytes] == [int(b) for b in f16_bytes]


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
    assert "pipeline plan: 2 stage(s) x 4 micro-batch(es) (memory as GPipe keeps it, also for 1F1B)" in r.stdout, r.stdout
    cu = (tmp_path / "train.cu").read_text()
    stages = cu.split("namespace cnnc_stage")
    assert len(stages) == 1 + 2 * 2, "two stages, each opened and closed"
    s0, s1 = stages[1], stages[3]
    # Stage 0 sends to 1 and receives from it; stage 1 the other way round.
    assert len(re.findall(r"cnnrt::dist::send\(ctx, A \+ \d+, \d+ull, 1,", s0)) == M
    assert len(re.findall(r"cnnrt::dist::recv\(ctx, A \+ \d+, \d+ull, 1,", s0)) == M
    assert len(re.findall(r"cnnrt::dist::recv\(ctx, A \+ \d+, \d+ull, 0,", s1)) == M
    assert len(re.findall(r"cnnrt::dist::send\(ctx, A \+ \d+, \d+ull, 0,", s1)) == M
    for s in (s0, s1):
        assert "cnnrt::dist::prepare(ctx, 0)" in s
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
    sent = re.findall(r"dist::send\(ctx, A \+ \d+, (\d+)ull", s0)
    got = re.findall(r"dist::recv\(ctx, A \+ \d+, (\d+)ull", s1)
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
        assert len(re.findall(r"cnnrt::dist::(?:send|recv)\(ctx", s)) == 2 * M
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


def test_python_compile_refuses_pipeline_stages():
    """cnnc.compile(pipeline_stages=S, micro_batches=M) is one CompileError
    naming the options and the executable that runs them (cnnc/pipeline.py:
    a Trainer's step runs in this process on one device; pipeline stages are
    one process per GPU), on the CPU as on the GPU, before anything is
    exported or compiled; bad values are ValueErrors naming the option."""
    import cnnc
    model = tc.make_model("simplecnn", seed=0)
    x = torch.randn(B, 3, 32, 32)
    with pytest.raises(cnnc.CompileError) as e:
        cnnc.compile(model, x, pipeline_stages=2, micro_batches=4, device="cpu")
    msg = str(e.value)
    assert "cnnc.compile(pipeline_stages=2, micro_batches=4) on cpu" in msg, msg
    assert "cnnc model.onnx --train --pipeline-stages 2 --micro-batches 4 -o train" in msg, msg
    assert "accumulate=4" in msg, msg
    with pytest.raises(ValueError, match=r"micro_batches=4 splits the batch of pipeline "
                                         r"stages: give pipeline_stages too"):
        cnnc.compile(model, x, micro_batches=4, device="cpu")
    with pytest.raises(ValueError, match=r"pipeline_stages must be an int >= 2, got 1"):
        cnnc.compile(model, x, pipeline_stages=1, device="cpu")
    with pytest.raises(ValueError, match=r"micro_batches must be an int >= 1, got 0"):
        cnnc.compile(model, x, pipeline_stages=2, micro_batches=0, device="cpu")


def _transfer_groups(stage_text):
    """The NCCL transfers of one stage's emitted step, in issue order: a
    list of groups (dist::groupStart .. groupEnd, else one transfer each),
    each a list of ("S" | "R", peer)."""
    groups, cur = [], None
    for line in stage_text.splitlines():
        line = line.strip()
        if line.startswith("cnnrt::dist::groupStart("):
            cur = []
        elif line.startswith("cnnrt::dist::groupEnd("):
            groups.append(cur)
            cur = None
        else:
            m = re.match(r"cnnrt::dist::(send|recv)\(ctx, A \+ \d+, \d+ull, (\d+),", line)
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
