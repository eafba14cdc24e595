"""The timm families of issue 32's zoo: one small member of each CNN family
(ops beyond ResNet: GroupNorm, upsampling, softmax attention, Conv1d,
ReduceL2, weight standardization, TF "same" padding), small enough to
export, compile and check in well under a minute each at 64x64. Shared by
test/gpu/check_zoo.py (numerics against PyTorch) and bench/zoo_bench.py
(`--zoo timm`: ms/step against PyTorch). No imports: the CPU side reads it
too."""

TIMM_FAMILIES = [
    "resnet26d", "seresnext26d_32x4d", "ecaresnet26t", "skresnet18",
    "resnest14d", "ese_vovnet19b_dw", "dla34", "dpn68", "hrnet_w18_small",
    "cspresnet50", "cs3darknet_s", "regnetx_002", "regnety_002", "rexnet_100",
    "ghostnet_100", "mixnet_s", "tf_efficientnet_b0", "mobilenetv3_large_100",
    "lcnet_050", "hardcorenas_a", "fbnetc_100", "spnasnet_100",
    "semnasnet_100", "densenetblur121d", "selecsls42b", "res2net50_26w_4s",
    "gernet_s", "repvgg_a2", "nf_resnet26", "convnext_atto",
    "convnextv2_atto", "resnetv2_50x1_bit", "gcresnext26ts",
    "efficientnet_lite0", "efficientnetv2_rw_t", "dla46_c", "resnet10t",
    # TF "same" padding (Conv2dSame's computed pads fold at import) and the
    # NFNet form (SiLU, grouped convs, SE, extra conv) beside nf_resnet26.
    "tf_mobilenetv3_small_100", "nfnet_l0",
]
