"""cnnc.export's SyncBatchNorm stand-ins live where the model lives: under
torchrun a model on cuda:LOCAL_RANK was traced with stand-in BatchNorm layers
made on the CPU ("weight is on cpu, different from other tensors on
cuda:1", found on 4 H200s by bench/device-dp.sh E c). No GPU here: the meta
device stands in for a second device."""
import torch

from cnnc.export import without_sync_batch_norm


def test_sync_batch_norm_stand_ins_keep_the_device():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3),
                                torch.nn.SyncBatchNorm(4), torch.nn.ReLU())
    model = model.to("meta")
    copy = without_sync_batch_norm(model)
    bn = copy[1]
    assert not isinstance(bn, torch.nn.SyncBatchNorm)
    for name, t in list(bn.named_parameters()) + list(bn.named_buffers()):
        assert t.device.type == "meta", (name, t.device)
    # The model itself is untouched.
    assert isinstance(model[1], torch.nn.SyncBatchNorm)
