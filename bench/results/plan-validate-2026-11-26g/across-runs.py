#!/usr/bin/python3
"""How alike saved plan-validate runs measure: for each configuration, the
Spearman correlation of the strategies' measured medians between every
pair of runs that measured it (the planner's row left out), min, median
and max over the pairs.  Run from the tree's top:

  bench/results/plan-validate-2026-11-26g/across-runs.py DIR [DIR ...]
"""
import importlib.machinery
import importlib.util
import itertools
import json
import os
import statistics
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
loader = importlib.machinery.SourceFileLoader("repredict", os.path.join(TOP, "bench", "plan-repredict"))
spec = importlib.util.spec_from_loader("repredict", loader)
repredict = importlib.util.module_from_spec(spec)
loader.exec_module(repredict)

NAMES = ("lenet2 lenet2-1g lenet4 lenet4-1g wide2 wide2-1g wide4 wide4-1g mesh2 mesh2-1g mesh4 mesh4-1g "
         "r50-2 r50-2-1g r50-4 r50-4-1g").split()
dirs = sys.argv[1:]
if not dirs:
    sys.exit(__doc__.strip())
for name in NAMES:
    runs = []
    for d in dirs:
        path = os.path.join(d, name + ".json")
        if os.path.exists(path):
            with open(path) as f:
                runs.append({r["strategy"]: r["measured"] for r in json.load(f)["rows"] if r["strategy"] != "planner"})
    rhos = []
    for a, b in itertools.combinations(runs, 2):
        common = sorted(set(a) & set(b))
        if len(common) > 2:
            rhos.append(repredict.spearman([a[k] for k in common], [b[k] for k in common]))
    if rhos:
        print("%-9s %2d pairs of runs: min %.2f, median %.2f, max %.2f" % (
            name, len(rhos), min(rhos), statistics.median(rhos), max(rhos)))
