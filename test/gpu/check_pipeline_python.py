#!/usr/bin/env python3
"""GPU check of the Python entry's pipeline stages (issue 38, docs/python.md
"Pipeline stages"), launched as PyTorch's pipeline API is:

  torchrun --standalone --nproc-per-node 2 test/gpu/check_pipeline_python.py
  torchrun --standalone --nproc-per-node 4 test/gpu/check_pipeline_python.py --stages 4
  torchrun --standalone --nproc-per-node 4 test/gpu/check_pipeline_python.py --stages 2
      (2 stages x 2 data-parallel replicas)

Every process calls cnnc.compile(SimpleCNN, x, pipeline_stages=S,
micro_batches=M, precision='fp32' (--precision fp16: the GPU default, bounds
1e-2 / 3e-2 / 5e-2 instead)) and trainer.step(x, y) on its replica's
batch (rank = replica x S + stage; stage 0 reads x, the last stage y) for
--steps steps. Each rank writes what it saw to the work directory; rank 0
then runs the references in a child process with no launcher variables (one
GPU: cnnc.compile(..., accumulate=D x M) over the same global batch, and
PyTorch f32 with TF32 off: D x M backward passes of loss / (D x M), one
optimizer.step()) and asserts:

- the last stage's per-step losses equal the one-GPU accumulate losses
  (relative 1e-5) and PyTorch's (relative 1e-4);
- the stages before the last returned None (only the last has the loss);
- the stages' state_dicts (each its own parameters) are disjoint, their
  union is the model's, and equals the accumulate run's weights (relative
  1e-4, max over tensors);
- sync_to(model) on a stage wrote its own parameters and left the others
  as they were;
- the replicas' losses agree (D > 1).

With --kill-rank R, rank R exits (code 9) before step 3, a stage that dies:
the caller checks that torchrun ends non-zero (not by `timeout`), naming
rank R's exit code 9 and the others stopped:
  timeout 200 torchrun --standalone --nproc-per-node 2 \
      test/gpu/check_pipeline_python.py --kill-rank 1; echo $?   # 1, not 124
(4 x H200, session 27: exit 1 after 14 s, ChildFailedError: rank 1 exit 9,
rank 0 SIGTERM).

The last line (rank 0) is `check_pipeline_python: PASS` or
`check_pipeline_python: FAIL <what>`; a failing rank exits 1. Every process
has a watchdog (--timeout, default 600 s) that prints FAIL and exits 3, and
CNNC_DIST_TIMEOUT (default 120 s) bounds every NCCL wait, so no rank hangs.
Environment: as check_python_api.py (CNNC_BUILD_DIR or CNNC, and
CNNC_RUNTIME_DIR for the runtime; bench/device-verify.sh).
Exit 77 without a GPU or without torchrun's variables (not launched by it).
`--self-test` runs the comparison helpers on made-up data (no GPU).
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

NAME = "check_pipeline_python"
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                 "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                 "GROUP_WORLD_SIZE", "ROLE_NAME", "CNNC_PIPELINE_STAGES")


def watchdog(seconds, who):
    """Ends this process with a FAIL line after `seconds` (a hung NCCL wait,
    a stuck compile): torchrun then stops the other ranks."""
    def fire():
        time.sleep(seconds)
        print("%s: FAIL %s: no result within %d s (watchdog)" % (NAME, who, seconds),
              flush=True)
        os._exit(3)
    threading.Thread(target=fire, daemon=True).start()


def rel(a, b):
    """Relative difference of two floats (0 for two zeros)."""
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def max_rel(a, b):
    """Largest relative difference of two tensors, as a float."""
    d = (a.double() - b.double()).abs().max().item()
    return d / max(b.double().abs().max().item(), 1e-30)


def batch(step, rows, torch):
    """The global batch of a step (the same on every rank): rows images of
    3 x 32 x 32 and their labels."""
    g = torch.Generator().manual_seed(1000 + step)
    return (torch.randn(rows, 3, 32, 32, generator=g),
            torch.randint(0, 10, (rows,), generator=g))


def make_model(torch):
    from cnnc.export import SimpleCNN  # no BatchNorm: exact accumulation
    torch.manual_seed(0)
    return SimpleCNN(num_classes=10)


def sgd(model, torch):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)


def stage_run(a, torch):
    """One torchrun process: its stage of its replica."""
    import cnnc
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    S, M, B = a.stages, a.micro_batches, a.micro_batch
    D = world // S
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    model = make_model(torch)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = sgd(model, torch)
    rows = M * B
    trainer = cnnc.compile(model, torch.zeros(rows, 3, 32, 32), optimizer=opt,
                           precision=a.precision, pipeline_stages=S, micro_batches=M,
                           pipeline_schedule=a.schedule)
    p = trainer.pipeline
    out = {"rank": rank, "stage": p.stage, "replica": p.replica, "replicas": p.replicas,
           "losses": [], "none_losses": 0, "errors": []}
    if (p.stage, p.replica, p.replicas) != (rank % S, rank // S, D):
        out["errors"].append("rank %d placed at stage %s replica %s of %s" %
                             (rank, p.stage, p.replica, p.replicas))
    for k in range(a.steps):
        x, y = batch(k, D * rows, torch)
        xr = x[p.replica * rows:(p.replica + 1) * rows].to(device)
        yr = y[p.replica * rows:(p.replica + 1) * rows].to(device)
        if rank == a.kill_rank and k == 2:
            # A stage that dies mid-run (--kill-rank): torchrun must stop the
            # others, which wait on it inside NCCL, with no hang.
            print("%s: rank %d dies before step %d (--kill-rank)" % (NAME, rank, k + 1),
                  flush=True)
            os._exit(9)
        loss = trainer.step(xr, yr)
        if loss is None:
            out["none_losses"] += 1
        else:
            out["losses"].append(float(loss))
    torch.cuda.synchronize(device)
    if trainer.is_last_stage != (p.stage == S - 1):
        out["errors"].append("is_last_stage is %s on stage %d" % (trainer.is_last_stage,
                                                                  p.stage))
    if p.stage == S - 1 and out["none_losses"]:
        out["errors"].append("the last stage returned None %d times" % out["none_losses"])
    if p.stage != S - 1 and (out["losses"] or out["none_losses"] != a.steps):
        out["errors"].append("stage %d returned a loss" % p.stage)
    sd = trainer.state_dict()
    torch.save({k: v.cpu() for k, v in sd.items()},
               os.path.join(a.work, "state_rank%d.pt" % rank))
    # sync_to: this stage's entries written, the others left as they were.
    trainer.sync_to(model)
    after = model.state_dict()
    for k, v in after.items():
        want = sd[k].to(v.device) if k in sd else before[k]
        if not torch.equal(v, want):
            out["errors"].append("sync_to: %s is %s" % (
                k, "not the trained value" if k in sd else "changed on another stage"))
    if p.stage == 0 and not out["errors"]:
        moved = [k for k in sd if k.endswith("weight") and not torch.equal(sd[k].cpu(),
                                                                            before[k])]
        if not moved:
            out["errors"].append("stage 0's weights did not change")
    with open(os.path.join(a.work, "rank%d.json" % rank), "w") as f:
        json.dump(out, f)
    return out


def reference_run(a, torch):
    """The child process of rank 0 (one GPU, no launcher variables): the
    one-GPU accumulate step and PyTorch f32 over the same global batches."""
    import cnnc
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    M, B, D = a.micro_batches, a.micro_batch, a.replicas
    n = D * M
    device = torch.device("cuda", 0)
    model = make_model(torch)
    trainer = cnnc.compile(model, torch.zeros(B, 3, 32, 32), optimizer=sgd(model, torch),
                           precision=a.precision, accumulate=n, device="cuda")
    ref = make_model(torch).to(device)
    ref_opt = sgd(ref, torch)
    acc_losses, torch_losses = [], []
    for k in range(a.steps):
        x, y = batch(k, n * B, torch)
        x, y = x.to(device), y.to(device)
        micro = [float(trainer.step(x[m * B:(m + 1) * B], y[m * B:(m + 1) * B]))
                 for m in range(n)]
        acc_losses.append(sum(micro) / n)
        ref_opt.zero_grad()
        total = 0.0
        for m in range(n):
            loss = torch.nn.functional.cross_entropy(ref(x[m * B:(m + 1) * B]),
                                                     y[m * B:(m + 1) * B])
            (loss / n).backward()
            total += float(loss)
        ref_opt.step()
        torch_losses.append(total / n)
    torch.save({k: v.cpu() for k, v in trainer.state_dict().items()},
               os.path.join(a.work, "state_accumulate.pt"))
    with open(os.path.join(a.work, "reference.json"), "w") as f:
        json.dump({"accumulate": acc_losses, "torch": torch_losses}, f)


def compare(a, ranks, reference, shards, whole, torch=None):
    """Rank 0's verdict from every rank's record, the references and the
    state shards: a list of failures (empty: PASS)."""
    S, D = a.stages, a.replicas
    # f32: the pipeline is the accumulate step's arithmetic (1e-5) and
    # PyTorch f32's (1e-4); fp16 (--precision fp16, the GPU default): both
    # cnnc runs scale and round alike, PyTorch f32 is 3 % away at most.
    f16 = getattr(a, "precision", "fp32") == "fp16"
    acc_tol, torch_tol, weight_tol = (1e-2, 3e-2, 5e-2) if f16 else (1e-5, 1e-4, 1e-4)
    fails = []
    for r in ranks:
        fails += ["rank %d: %s" % (r["rank"], e) for e in r["errors"]]
    last = [r for r in ranks if r["stage"] == S - 1]
    if len(last) != D:
        return fails + ["%d last-stage ranks reported, expected %d" % (len(last), D)]
    main = min(last, key=lambda r: r["replica"])["losses"]
    print("pipeline losses  %s" % " ".join("%.7f" % v for v in main))
    print("accumulate=%-5d %s" % (a.micro_batches * D,
                                  " ".join("%.7f" % v for v in reference["accumulate"])))
    print("pytorch f32      %s" % " ".join("%.7f" % v for v in reference["torch"]))
    if len(main) != a.steps:
        fails.append("%d losses on the last stage, expected %d" % (len(main), a.steps))
    for k, (p, q, t) in enumerate(zip(main, reference["accumulate"], reference["torch"])):
        if rel(p, q) > acc_tol:
            fails.append("step %d loss %.7g vs accumulate %.7g (rel %.2g > %g)"
                         % (k + 1, p, q, rel(p, q), acc_tol))
        if rel(p, t) > torch_tol:
            fails.append("step %d loss %.7g vs PyTorch %.7g (rel %.2g > %g)"
                         % (k + 1, p, t, rel(p, t), torch_tol))
    for r in last:
        if any(rel(u, v) > 1e-6 for u, v in zip(r["losses"], main)):
            fails.append("replica %d's losses differ from replica 0's" % r["replica"])
    if whole is not None:
        seen = {}
        for stage, sd in shards.items():
            for k in sd:
                if k in seen:
                    fails.append("%s in the state_dicts of stages %d and %d"
                                 % (k, seen[k], stage))
                seen[k] = stage
        missing = sorted(set(whole) - set(seen))
        if missing:
            fails.append("no stage's state_dict has %s" % ", ".join(missing))
        worst = 0.0
        for stage, sd in shards.items():
            for k, v in sd.items():
                if k in whole and v.is_floating_point():
                    worst = max(worst, max_rel(v, whole[k]))
        print("weights: max relative difference to accumulate %.3g" % worst)
        if worst > weight_tol:
            fails.append("weights differ from accumulate's by %.3g (> %g)"
                         % (worst, weight_tol))
    return fails


def self_test():
    """The comparison on made-up records (no GPU): a passing set, then each
    kind of failure found."""
    class A:
        stages, replicas, micro_batches, steps = 2, 1, 4, 2
    ok_ranks = [{"rank": 0, "stage": 0, "replica": 0, "losses": [], "errors": []},
                {"rank": 1, "stage": 1, "replica": 0, "losses": [2.3, 2.2], "errors": []}]
    ref = {"accumulate": [2.3, 2.2], "torch": [2.30001, 2.20001]}
    assert compare(A, ok_ranks, ref, {}, None) == []
    bad = [dict(ok_ranks[0]), dict(ok_ranks[1], losses=[2.3, 2.21])]
    assert any("step 2 loss" in f for f in compare(A, bad, ref, {}, None))
    assert compare(A, ok_ranks[:1], ref, {}, None) == [
        "0 last-stage ranks reported, expected 1"]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        whole = {"a": torch.ones(2), "b": torch.ones(3)}
        shards = {0: {"a": torch.ones(2)}, 1: {"a": torch.ones(2)}}
        fails = compare(A, ok_ranks, ref, shards, whole)
        assert "a in the state_dicts of stages 0 and 1" in fails, fails
        assert "no stage's state_dict has b" in fails, fails
        shards = {0: {"a": torch.ones(2)}, 1: {"b": torch.ones(3) * 1.001}}
        assert any("weights differ" in f for f in compare(A, ok_ranks, ref, shards, whole))
    print("%s: self-test passed" % NAME)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--schedule", default="gpipe", choices=("gpipe", "1f1b"))
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16"),
                    help="fp16: the GPU default, with looser bounds (see compare)")
    ap.add_argument("--work", default=None, help="shared directory of the ranks' records")
    ap.add_argument("--kill-rank", type=int, default=-1,
                    help="this rank exits before step 3: the run must fail, not hang")
    ap.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--replicas", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    try:
        import torch
    except ImportError:
        print("%s: no torch: skipped" % NAME)
        return 77
    if not torch.cuda.is_available():
        print("%s: no CUDA GPU: skipped" % NAME)
        return 77
    if a.reference:
        watchdog(a.timeout, "the reference run")
        reference_run(a, torch)
        return 0
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        print("%s: launch it with torchrun --nproc-per-node S x D: skipped" % NAME)
        return 77
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    who = "rank %d" % rank
    watchdog(a.timeout, who)
    os.environ.setdefault("CNNC_DIST_TIMEOUT", "120")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    if world % a.stages != 0:
        print("%s: FAIL world size %d is no multiple of --stages %d" % (NAME, world, a.stages))
        return 1
    a.replicas = world // a.stages
    # One directory for the ranks of this run (one host: torchrun's id).
    a.work = a.work or "/tmp/%s-%s-%s" % (NAME, os.environ.get("TORCHELASTIC_RUN_ID", "x"),
                                          os.environ.get("MASTER_PORT", "0"))
    os.makedirs(a.work, exist_ok=True)
    try:
        mine = stage_run(a, torch)
    except Exception as e:  # one line, then torchrun stops the others
        print("%s: FAIL %s: %s: %s" % (NAME, who, type(e).__name__, e), flush=True)
        return 1
    for e in mine["errors"]:
        print("%s: %s: %s" % (NAME, who, e), flush=True)
    if rank != 0:
        return 1 if mine["errors"] else 0
    # Rank 0: the others' records (they finish their steps with rank 0's).
    deadline = time.time() + 120
    paths = [os.path.join(a.work, "rank%d.json" % r) for r in range(world)]
    while not all(os.path.exists(p) for p in paths):
        if time.time() > deadline:
            print("%s: FAIL no record from ranks %s" % (NAME, [
                r for r, p in enumerate(paths) if not os.path.exists(p)]))
            return 1
        time.sleep(0.5)
    time.sleep(0.5)  # each record is written whole before the state file's rank closes
    ranks = []
    for p in paths:
        with open(p) as f:
            ranks.append(json.load(f))
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["CUDA_VISIBLE_DEVICES"] = str(torch.cuda.current_device()) \
        if "CUDA_VISIBLE_DEVICES" not in os.environ else \
        os.environ["CUDA_VISIBLE_DEVICES"].split(",")[torch.cuda.current_device()]
    cmd = [sys.executable, os.path.abspath(__file__), "--reference", "--work", a.work,
           "--stages", str(a.stages), "--micro-batches", str(a.micro_batches),
           "--micro-batch", str(a.micro_batch), "--steps", str(a.steps),
           "--replicas", str(a.replicas), "--timeout", str(a.timeout),
           "--precision", a.precision]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        print("%s: FAIL the reference run took over %d s" % (NAME, a.timeout))
        return 1
    if r.returncode != 0:
        print((r.stdout + r.stderr)[-3000:])
        print("%s: FAIL the reference run (exit %d)" % (NAME, r.returncode))
        return 1
    with open(os.path.join(a.work, "reference.json")) as f:
        reference = json.load(f)
    shards = {rec["stage"]: torch.load(os.path.join(a.work, "state_rank%d.pt" % rec["rank"]))
              for rec in ranks if rec["replica"] == 0}
    whole = torch.load(os.path.join(a.work, "state_accumulate.pt"))
    fails = compare(a, ranks, reference, shards, whole, torch)
    if fails:
        for f in fails:
            print("FAIL  " + f)
        print("%s: FAIL %s" % (NAME, fails[0]))
        return 1
    print("S=%d x D=%d, M=%d, %s, %s, %d steps: every check passed" % (
        a.stages, a.replicas, a.micro_batches, a.schedule, a.precision, a.steps))
    print("%s: PASS" % NAME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
