#!/usr/bin/env python3
"""Lists the cnn dialect op classes that each given source file names.

An op class is a `def CNN_<Name>Op` of include/cnnc/Dialect/CNN/*.td; a name
counts when it appears outside comments and is not qualified by another
dialect's namespace (math::ExpOp, arith::ConstantOp are not cnn ops).
Issue 32 counted these to measure how much op knowledge each stage keeps
outside the op; docs/adding-an-op.md quotes the result.
Usage: scripts/count-op-names.py FILE..."""
import glob
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
defs = set()
for td in glob.glob(os.path.join(root, "include/cnnc/Dialect/CNN/*.td")):
    defs |= set(re.findall(r"^def CNN_(\w+Op)\s*:", open(td).read(), re.M))
print("cnn op classes defined: %d" % len(defs))
for f in sys.argv[1:]:
    text = re.sub(r"//[^\n]*", "", open(f).read())
    named = sorted(d for d in defs
                   if re.search(r"(?<!math::)(?<!arith::)(?<!scf::)\b%s\b" % d, text))
    print("%s: %d\n    %s" % (f, len(named), ", ".join(named)))
