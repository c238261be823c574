#!/usr/bin/env python3
"""kernels.py TRACE.json...: per rank, the workers' task time per traced
iteration by phase (F: forward, B: backward, load: the input's, o: the
rest: updates, the collectives' and exchanges' tasks), the time they waited, and the
tasks they waited longest before (idle before a task: no task of the
rank running since the previous one ended); and rank 1's convolution
kernels (forward, data and filter gradients) over rank 0's, the same
tasks."""
import collections, json, sys

FWD = {"fwd", "stats", "running"}
BWD = {"bwd_data", "bwd_filter", "relu_bwd", "bwd_stats", "param_grad"}
for f in sys.argv[1:]:
    ev = [e for e in json.load(open(f))["traceEvents"] if e.get("ph") == "X" and e["tid"] < 1000]
    its = sorted({e["args"].get("iteration") for e in ev if e.get("args")})
    n = len(its)
    print(f"{f}: {n} iterations")
    conv = collections.Counter()
    for e in ev:
        if e["name"].startswith("conv") and e["name"].split(".", 1)[-1] in ("fwd", "bwd_data", "bwd_filter"):
            conv[e["pid"]] += e["dur"]
    for r in (0, 1):
        X = sorted((e for e in ev if e["pid"] == r), key=lambda e: e["ts"])
        phase, idle, cur = collections.Counter(), collections.Counter(), X[0]["ts"]
        for e in X:
            kind = e["name"].split(".", 1)[-1]
            key = "F" if kind in FWD else "B" if kind in BWD else "L" if kind == "load" else "o"
            phase[key] += e["dur"] / 1e3 / n
            if e["ts"] > cur:
                idle[e["name"]] += (e["ts"] - cur) / 1e3 / n
            cur = max(cur, e["ts"] + e["dur"])
        span = (X[-1]["ts"] + X[-1]["dur"] - X[0]["ts"]) / 1e3 / n
        top = ", ".join(f"{k} {v:.2f}" for k, v in idle.most_common(4))
        print(f"  rank {r}: {span:.1f} ms an iteration: F {phase['F']:.1f} B {phase['B']:.1f} load {phase['L']:.1f} o {phase['o']:.1f}, "
              f"waiting {sum(idle.values()):.1f} ms (most before {top})")
    print(f"  rank 1's convolution kernels over rank 0's: {conv[1] / conv[0]:.2f}")
