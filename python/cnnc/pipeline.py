"""Pipeline stages from Python (issue 38, docs/pipeline-parallel.md,
docs/python.md "Pipeline stages").

`cnnc.compile(model, x, pipeline_stages=S, micro_batches=M)` compiles the
step that `cnnc --train --pipeline-stages S --micro-batches M` compiles: the
model cut into S stages (cnn-pipeline-partition picks the cuts), the batch x
(N rows) cut into M micro-batches of N / M, the M micro-steps' gradients
accumulated into one update, exactly as `accumulate=M` over the same M
micro-batches. It runs in one of two ways:

- On the GPU, one process per stage and GPU, as torch.distributed.pipelining
  is launched: `torchrun --nproc-per-node S*D script.py`. Every process
  calls `cnnc.compile(...)` and `trainer.step(x, y)` with its replica's
  whole batch; rank = replica x S + stage (the executable's layout), so the
  process of RANK r runs stage r % S of replica r // S on cuda:LOCAL_RANK.
  The step library (`cnnc --emit lib --pipeline-stages S [--gpus D]`) holds
  every stage; a process creates its stage's session (cnnrt_c.h,
  cnnrt_pipeline_stage_spec) with CNNC_PIPELINE_STAGES=S, so that the NCCL
  layer splits the world into each replica's stages (activations and
  gradients, the fp16 loss-scale flag) and each stage's replicas (the
  gradient all-reduce). Stage 0 reads x, the last stage y; the last stage
  returns the loss, the others None (as PyTorch's pipeline schedules: only
  the last stage has it). Each stage holds only its own parameters:
  state_dict() / sync_to(model) read and write those, and leave the
  module's other parameters as they are.
- On the CPU reference interpreter (no GPU, or device='cpu'), in this one
  process: the split step runs each stage on a thread of its own
  (reference::runScheduledPipelineStep, what `cnnc --run-reference
  --pipeline-stages S` runs); the trainer holds every stage's state and
  returns the mean of the M micro-batches' losses. Bitwise what
  accumulate=M computes over the same micro-batches.
"""
import collections
import os
import warnings

SCHEDULES = ("gpipe", "1f1b")

#: What compile() resolved: S, M and the schedule; on the GPU this process's
#: stage and replica and the replica count (None on the CPU, where one
#: process runs every stage).
#: chunks: interleaved stages (--pipeline-chunks), 1 without.
Plan = collections.namedtuple(
    "Plan", "stages micro_batches schedule stage replica replicas chunks",
    defaults=(1,))


def _count(name, value, minimum):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError("%s must be an int >= %d, got %r" % (name, minimum, value))
    return value


def check_options(pipeline_stages, micro_batches, pipeline_schedule, accumulate,
                  pipeline_chunks=None):
    """Validates compile()'s pipeline options before anything is exported.
    Returns None without pipeline_stages, else Plan(S, M, schedule, None,
    None, None, chunks) (the layout is filled in by place())."""
    stages = _count("pipeline_stages", pipeline_stages, 2)
    micro = _count("micro_batches", micro_batches, 1)
    chunks = _count("pipeline_chunks", pipeline_chunks, 1)
    if stages is None:
        if micro is not None:
            raise ValueError("micro_batches=%d splits the batch of pipeline stages: give "
                             "pipeline_stages too (one device: accumulate=%d)" % (micro, micro))
        if pipeline_schedule is not None:
            raise ValueError("pipeline_schedule=%r orders the micro-batches of pipeline "
                             "stages: give pipeline_stages too" % (pipeline_schedule,))
        if chunks is not None:
            raise ValueError("pipeline_chunks=%d interleaves pipeline stages: give "
                             "pipeline_stages too" % chunks)
        return None
    if micro is None:
        raise ValueError("pipeline_stages=%d needs micro_batches=M, the micro-batches "
                         "each step's batch is cut into (M >= %d keeps every stage busy "
                         "part of the time; the bubble is (S-1)/(M+S-1))" % (stages, stages))
    schedule = "gpipe" if pipeline_schedule is None else pipeline_schedule
    if schedule not in SCHEDULES:
        raise ValueError("pipeline_schedule must be 'gpipe' or '1f1b', got %r" % (schedule,))
    if accumulate != 1:
        raise ValueError("accumulate=%r with pipeline_stages: the %d micro-batches are the "
                         "accumulation's micro-steps (one update per trainer.step)"
                         % (accumulate, micro))
    chunks = 1 if chunks is None else chunks
    if chunks > 1 and schedule != "gpipe":
        raise ValueError("pipeline_chunks=%d (interleaved stages) needs the 'gpipe' schedule, "
                         "got %r" % (chunks, schedule))
    return Plan(stages, micro, schedule, None, None, None, chunks)


def ensure_hardware_queues(torch):
    """Interleaved stages on the GPU: every CUDA hardware queue the device
    has (CUDA_DEVICE_MAX_CONNECTIONS=32; the executable's stage processes
    set the same). A stage's NCCL receives wait on their link streams from
    the top of the step, and streams that share one of the default 8 queues
    run one after the other: a waiting receive could stall the compute
    stream that feeds the ring (a precaution: the hangs of sessions 34-35
    came from the first step's library set-up and the CUDA graph's replay,
    which the runtime now avoids). CUDA reads the variable when it starts, so
    it is set here only while torch has not started CUDA; after that a
    warning says what to do."""
    if os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"):
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        warnings.warn("pipeline_chunks > 1: CUDA has started without "
                      "CUDA_DEVICE_MAX_CONNECTIONS; set CUDA_DEVICE_MAX_CONNECTIONS=32 in the "
                      "environment of every rank (streams that share a hardware queue can stall "
                      "an interleaved step)", RuntimeWarning, stacklevel=3)
        return
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "32"


def micro_batch(plan, example_input):
    """The micro-batch the step is exported for: example_input's batch (the
    whole step's, per replica) divided by M."""
    n = int(example_input.shape[0])
    if n % plan.micro_batches != 0:
        raise ValueError("the example batch of %d does not split into micro_batches=%d "
                         "(the step's batch is M micro-batches of equal size)"
                         % (n, plan.micro_batches))
    return example_input[: n // plan.micro_batches]


def place(plan, world, backend_kind, error):
    """This process's place in the pipeline (rank = replica x S + stage,
    torchrun's RANK). On the CPU one process runs every stage (world 1)."""
    S = plan.stages
    if backend_kind == "reference":
        if world > 1:
            raise error(
                "pipeline_stages=%d on the CPU reference interpreter runs every stage in "
                "this one process (threads), but the launcher started %d processes: "
                "run it without torchrun, or on GPUs" % (S, world))
        return plan
    if world < S or world % S != 0:
        raise error(
            "pipeline_stages=%d on the GPU runs one process per stage and GPU: launch "
            "%s under torchrun --nproc-per-node %d (x D for D data-parallel replicas; "
            "rank = replica x %d + stage); this process has a world size of %d"
            % (S, "the script", S, S, world))
    rank = int(os.environ.get("RANK", "0")) if world > 1 else 0
    if not 0 <= rank < world:
        raise error("RANK=%d is outside the world of %d" % (rank, world))
    return plan._replace(stage=rank % S, replica=rank // S, replicas=world // S)


def cnnc_args(plan):
    """cnnc's flags for the pipelined step (--gpus D is added with the other
    data-parallel flags)."""
    args = ["--pipeline-stages", str(plan.stages), "--micro-batches",
            str(plan.micro_batches), "--pipeline-schedule", plan.schedule]
    if plan.chunks > 1:
        args += ["--pipeline-chunks", str(plan.chunks)]
    return args


def split_for_reference(cnnc_opt, step_mlir, stages_mlir, plan, run, error):
    """The reference step's stages: @train_step (accumulating over M) split
    by cnn-pipeline-partition, -split and -schedule into @stage<s>_step, as
    the driver's reference training splits it (splitIntoPipelineStages)."""
    if cnnc_opt is None:
        raise error("cnnc-opt was not found next to cnnc: the CPU pipeline step needs it "
                    "to split the step into stages (build the cnnc-opt target)")
    run([cnnc_opt, step_mlir,
         "--cnn-pipeline-partition=stages=%d micro-batches=%d chunks=%d"
         % (plan.stages, plan.micro_batches, plan.chunks),
         "--cnn-pipeline-split",
         "--cnn-pipeline-schedule=schedule=%s" % plan.schedule,
         "-o", stages_mlir], "split the step into pipeline stages")


def stage_environment(plan):
    """Before a stage's session is created: the NCCL layer reads the stage
    count to split the world (runtime/src/Nccl.cu, splitForPipeline), and
    the C API leaves out the rank-0 state broadcast."""
    os.environ["CNNC_PIPELINE_STAGES"] = str(plan.stages)


def owned_names(names, state):
    """The model state_dict names a stage holds: its tensors, and the
    num_batches_tracked of each BatchNorm whose running mean it holds."""
    out = set()
    for n in names:
        if n in state:
            out.add(n)
        elif n.endswith("num_batches_tracked"):
            prefix = n[: -len("num_batches_tracked")]
            if prefix + "running_mean" in state:
                out.add(n)
    return out


def refuse_eval(plan):
    raise RuntimeError(
        "trainer.eval with pipeline_stages=%d: the pipelined step has no evaluation step "
        "(nor has the executable, docs/pipeline-parallel.md); sync_to(model) on every "
        "stage and evaluate the module" % plan.stages)
