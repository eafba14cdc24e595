"""cnnc.compile(..., scaler=GradScaler) (issue 33: a Python f16 resume
carries the loss scale). The GPU path (the f16 step resumes the scaler's
scale and growth tracker; sync_to writes them back) is checked on the device
by test/gpu/check_finetune_scaler.py; here, on the CPU: what compile accepts
and refuses, and the state glue of cnnc/scaler.py against a stand-in step.

torch 1.13 without CUDA disables every GradScaler at construction, so an
enabled scaler is a stand-in with GradScaler's state_dict / load_state_dict
contract (the keys and semantics of torch.amp.GradScaler)."""
import os
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

import cnnc  # noqa: E402
from cnnc import scaler as sc  # noqa: E402
from cnnc.api import CompileError, _Tensor  # noqa: E402
from cnnc.export import SimpleCNN  # noqa: E402
from cnnc.tools import find_library, find_tool  # noqa: E402


class StandInScaler:
    """GradScaler's state contract: state_dict() holds scale,
    growth_factor, backoff_factor, growth_interval, _growth_tracker;
    load_state_dict sets them."""

    def __init__(self, init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._enabled = enabled
        self._sd = {"scale": float(init_scale), "growth_factor": growth_factor,
                    "backoff_factor": backoff_factor,
                    "growth_interval": growth_interval, "_growth_tracker": 0}

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        return dict(self._sd) if self._enabled else {}

    def load_state_dict(self, sd):
        self._sd = dict(sd)


class StateStep:
    """A compiled step's named state (what _CudaBackend exposes)."""

    def __init__(self, scale=65536.0, tracker=0.0):
        self.values = {sc.SCALE_NAME: torch.tensor(scale),
                       sc.TRACKER_NAME: torch.tensor(tracker)}
        self.loss_scale_names = set(self.values)

    def get(self, t):
        return self.values[t.name].clone()

    def set(self, t, value):
        assert t.name in self.values, t.name
        self.values[t.name] = value.detach().to(torch.float32).reshape(())


class FakeTrainer:
    def __init__(self, backend):
        self._backend = backend


def test_scaler_state_round_trips_through_the_step():
    scaler = StandInScaler(init_scale=1024.0)
    scaler._sd["_growth_tracker"] = 7
    step = StateStep()
    trainer = FakeTrainer(step)
    sc.load_into(trainer, scaler)
    # The step starts from the scaler's values, not cnnc's 65536 / 0.
    assert float(step.values[sc.SCALE_NAME]) == 1024.0
    assert float(step.values[sc.TRACKER_NAME]) == 7.0
    # The step trains on: one overflow halved the scale, 3 clean steps since.
    step.values[sc.SCALE_NAME] = torch.tensor(512.0)
    step.values[sc.TRACKER_NAME] = torch.tensor(3.0)
    sc.write_back(trainer)
    sd = scaler.state_dict()
    assert sd["scale"] == 512.0 and sd["_growth_tracker"] == 3, sd
    assert isinstance(sd["_growth_tracker"], int)
    # The other settings are left as they were.
    assert (sd["growth_factor"], sd["backoff_factor"], sd["growth_interval"]) == (
        2.0, 0.5, 2000)
    # A later compile with this scaler resumes 512 / 3.
    step2 = StateStep()
    sc.load_into(FakeTrainer(step2), scaler)
    assert float(step2.values[sc.SCALE_NAME]) == 512.0
    assert float(step2.values[sc.TRACKER_NAME]) == 3.0


def test_no_scaler_leaves_the_step_alone():
    step = StateStep()
    trainer = FakeTrainer(step)
    sc.load_into(trainer, None)
    sc.write_back(trainer)
    assert float(step.values[sc.SCALE_NAME]) == 65536.0


def test_step_without_loss_scale_state_is_an_error():
    step = StateStep()
    step.loss_scale_names = set()
    with pytest.raises(CompileError, match="no loss-scale state"):
        sc.load_into(FakeTrainer(step), StandInScaler())


@pytest.mark.parametrize("key,value", [("growth_interval", 100),
                                       ("growth_factor", 4.0),
                                       ("backoff_factor", 0.25)])
def test_unsupported_scaler_settings_are_named(key, value):
    with pytest.raises(CompileError, match="GradScaler %s=%r is not supported" % (key, value)):
        sc.check(StandInScaler(**{key: value}), "fp16", "cuda")


def test_scaler_checks():
    ok = StandInScaler()
    assert sc.check(ok, "fp16", "cuda") is ok
    assert sc.check(None, "fp16", "cuda") is None
    # Disabled (GradScaler(enabled=use_amp) with use_amp False): no state.
    assert sc.check(StandInScaler(enabled=False), "fp32", "cuda") is None
    assert sc.check(StandInScaler(enabled=False), None, "reference") is None
    with pytest.raises(CompileError, match="disabled GradScaler, but the fp16 step"):
        sc.check(StandInScaler(enabled=False), "fp16", "cuda")
    with pytest.raises(CompileError, match="precision='fp32' step has no loss scaling"):
        sc.check(ok, "fp32", "cuda")
    with pytest.raises(CompileError, match="scale inf"):
        sc.check(StandInScaler(init_scale=float("inf")), "fp16", "cuda")
    with pytest.raises(TypeError, match="must be a torch.cuda.amp.GradScaler"):
        sc.check(object(), "fp16", "cuda")


@pytest.fixture
def cpu_compile(tmp_path, monkeypatch):
    if find_tool("cnnc") is None or find_library("libcnnc_reference.so") is None:
        pytest.skip("cnnc / libcnnc_reference.so not built")
    monkeypatch.setenv("CNNC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CNNC_ASSUME_NO_GPU", "1")
    torch.manual_seed(0)
    model = SimpleCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, opt, torch.randn(4, 3, 32, 32)


def test_compile_on_cpu_with_scalers(cpu_compile):
    model, opt, x = cpu_compile
    # An enabled scaler on the CPU reference step (no loss scaling): one
    # error naming it, before anything is built.
    with pytest.raises(CompileError, match="the CPU reference step has no loss scaling"):
        cnnc.compile(model, x, opt, scaler=StandInScaler())
    # A disabled one (torch's GradScaler(enabled=False)) trains as without.
    disabled = torch.cuda.amp.GradScaler(enabled=False)
    trainer = cnnc.compile(model, x, opt, scaler=disabled)
    y = torch.randint(0, 10, (4,))
    loss = trainer.step(x, y)
    assert loss == loss and loss > 0
    trainer.sync_to(model)
    assert disabled.state_dict() == {}
