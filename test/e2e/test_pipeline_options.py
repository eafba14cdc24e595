"""The pipeline options as the Python package reads them from cnnc
(cnnc --print-pipeline-options-json, python/cnnc/pipeline_options.py): one
declaration in the compiler, the flags of cnnc derived from it."""
import os
import subprocess

from cnnc import pipeline_options


def test_every_flag_is_a_cnnc_flag_with_its_description(cnnc):
    doc = pipeline_options.options(cnnc)
    help_text = subprocess.run([cnnc, "--help"], capture_output=True, text=True,
                               check=True).stdout
    hidden_text = subprocess.run([cnnc, "--help-hidden"], capture_output=True, text=True,
                                 check=True).stdout
    flags = [o for o in doc["options"] if o["flag"]]
    assert {o["name"] for o in flags} >= {"optimizer", "layout", "precision", "fuse",
                                          "remat-mb", "workspace-mb", "ignore-index"}
    assert {o["name"] for o in flags if o["hidden"]} >= {"fuse-group-norm",
                                                         "pipeline-time-slack"}
    for o in flags:
        assert o["flag"] == "--" + o["name"]
        # llvm::cl prints "--name" or "--name=<value>" then the description;
        # a hidden (A/B, tuning) option only in --help-hidden.
        text = hidden_text if o["hidden"] else help_text
        listed = ("  %s " % o["flag"]) in text or ("  %s=" % o["flag"]) in text
        assert listed, o
        assert o["description"][:40] in text, o
        if o["hidden"]:
            assert ("  %s " % o["flag"]) not in help_text, o
    # The options the driver sets from its own flags are not flags of their own.
    driver_set = {o["name"] for o in doc["options"] if not o["flag"]}
    assert driver_set == {"target", "optimize", "import-cleanup", "world-size", "arch"}


def test_target_defaults_are_what_cnnc_compiles(cnnc, tmp_path):
    gpu = {k: pipeline_options.target_default("gpu", k, cnnc) for k in ("layout", "precision")}
    cpu = {k: pipeline_options.target_default("cpu", k, cnnc) for k in ("layout", "precision")}
    assert gpu == {"layout": "nhwc", "precision": "fp16"}
    assert cpu == {"layout": "nchw", "precision": "fp32"}
    assert pipeline_options.default("ignore-index", cnnc) == -100
    model = os.path.join(os.path.dirname(__file__), "..", "Target", "CUDA", "Inputs",
                         "small_cnn.mlir")
    for target, want in (("gpu", gpu), ("cpu", cpu)):
        stats = subprocess.run([cnnc, model, "--train", "--target", target, "--emit", "mlir",
                                "--stats", "-o", str(tmp_path / ("%s.mlir" % target))],
                               capture_output=True, text=True, check=True).stderr
        assert "layout %s, precision %s" % (want["layout"], want["precision"]) in stats
