#!/usr/bin/env python3
"""Every ONNX node-test generator module of the installed python3-onnx
through test_onnx_conformance.py's harness (not only the CNN modules that
the test runs), for issue 32's "wide set" figure. Prints the totals, the
refusal counts per module and any wrong answer or unclean refusal; exit 1
when there is a wrong answer. Not a CI test (the figure is quoted in
docs/adding-an-op.md's issue 32 checklist).

    /usr/bin/python3 test/e2e/conformance_wide.py [path/to/cnnc]
"""
import collections
import concurrent.futures
import importlib
import os
import pkgutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_onnx_conformance as conf  # noqa: E402

import onnx.backend.test.case.node as node_cases  # noqa: E402


def main():
    cnnc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        HERE, "..", "..", "build", "bin", "cnnc")
    owner, skipped = {}, []
    modules = [m.name for m in pkgutil.iter_modules(node_cases.__path__)
               if m.name not in ("pool_op_common",)]
    for m in modules:
        before = len(node_cases._NodeTestCases)
        try:
            importlib.import_module("onnx.backend.test.case.node." + m)
        except Exception as e:  # generators that need an older numpy
            skipped.append("%s (%s)" % (m, type(e).__name__))
            continue
        for c in node_cases._NodeTestCases[before:]:
            owner.setdefault(c.name, m)
    seen, cases = set(), []
    for c in node_cases._NodeTestCases:
        if c.name not in seen:
            seen.add(c.name)
            cases.append(c)

    def run(case, work):
        try:
            return conf.run_case(cnnc, case, work)
        except ValueError as e:  # sequence outputs: nothing to compare
            return "harness", str(e)[:80]

    results = {}
    with tempfile.TemporaryDirectory() as work:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futs = {pool.submit(run, c, work): c.name for c in cases}
            for f in concurrent.futures.as_completed(futs):
                results[futs[f]] = f.result()
    per = collections.defaultdict(collections.Counter)
    total = collections.Counter()
    for name, (kind, detail) in sorted(results.items()):
        per[owner.get(name, "?")][kind] += 1
        total[kind] += 1
        if kind in ("wrong", "crash", "harness"):
            print("%s %s %s" % (kind.upper(), name, detail[:200]))
    for m, c in sorted(per.items(), key=lambda kv: -kv[1]["refused"]):
        if c["refused"]:
            print("refused %3d pass %3d  %s" % (c["refused"], c["pass"], m))
    print("skipped modules: " + (", ".join(skipped) or "none"))
    print("ONNX node conformance, every module: %d modules, %d cases, %d pass, "
          "%d refused, %d wrong, %d crash, %d harness" % (
              len(modules) - len(skipped), len(cases), total["pass"],
              total["refused"], total["wrong"], total["crash"], total["harness"]))
    return 1 if total["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
