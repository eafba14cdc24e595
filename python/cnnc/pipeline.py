"""Pipeline stages from Python (issue 38, docs/pipeline-parallel.md).

`cnnc.compile(..., pipeline_stages=S, micro_batches=M)` is refused with one
error naming the option, on both devices: a Trainer runs its step in this
process, one `trainer.step(x, y)` at a time on one GPU (the C API) or on
the CPU reference interpreter, while pipeline stages run as S processes,
one per GPU, each stage's step exchanging activations and gradients with
its neighbours through NCCL inside its captured graph. A stage's step
cannot be driven from one process's call: the executable runs them
(`cnnc model.onnx --train --pipeline-stages S --micro-batches M -o train`,
then `./train --data DIR`), and the reference interpreter runs the same
split in `cnnc --train --run-reference --pipeline-stages S`. What the
pipelined step computes is, bitwise on the reference interpreter, what
`accumulate=M` computes over the same M micro-batches, so the in-process
equivalent on one device is `cnnc.compile(..., accumulate=M)`.
"""


def _count(name, value, minimum):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError("%s must be an int >= %d, got %r" % (name, minimum, value))
    return value


def check_compile_options(pipeline_stages, micro_batches, device, error=RuntimeError):
    """Validates cnnc.compile's pipeline_stages / micro_batches and refuses
    them with `error` (cnnc.CompileError): see the module's docstring.
    Returns quietly when neither is given."""
    stages = _count("pipeline_stages", pipeline_stages, 2)
    micro = _count("micro_batches", micro_batches, 1)
    if stages is None and micro is None:
        return
    if stages is None:
        raise ValueError("micro_batches=%d splits the batch of pipeline stages: give "
                         "pipeline_stages too (one device: accumulate=%d)" % (micro, micro))
    micro = micro or 1
    raise error(
        "cnnc.compile(pipeline_stages=%d, micro_batches=%d) on %s: a Trainer runs its step "
        "in this process on one device, and pipeline stages run one process per GPU; "
        "build the executable instead: cnnc model.onnx --train --pipeline-stages %d "
        "--micro-batches %d -o train (then ./train --data DIR), or train in-process with "
        "accumulate=%d (the same update over the same micro-batches on one device; "
        "docs/pipeline-parallel.md)" % (stages, micro, device or "the default device",
                                          stages, micro, micro))
