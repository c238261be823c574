#!/usr/bin/python3
"""The planner's --fc-replicate prices against measurement: MODEL (default
wide) on RANKS ranks (default 2; batch BATCH, default 32; 1 worker each,
Fashion-MNIST) inside bench/slow-net --rate RATE (none: shared memory),
n<RANKS> under --grad-comm layer and end, --fc-replicate 0 and 1,
measured in turn over ROUNDS rounds as bench/plan-validate measures (the
median rate of the --log-every windows after the first), predicted by
starconv-plan from CAL (run 36's calibration of that network).
Run from the tree: bench/results/fc-replicate-2026-11-29/ab.py CAL RATE ROUNDS [MODEL RANKS BATCH]"""
import json, os, statistics, subprocess, sys

cal = sys.argv[1]
rate, rounds = sys.argv[2], int(sys.argv[3])
model, ranks, batch = (sys.argv[4:7] if len(sys.argv) > 6 else ("wide", "2", "32"))
grid = "n" + ranks
env = dict(os.environ, STARPU_SILENT="1", STARPU_NCPU="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
           STARPU_WORKERS_NOBIND="1")
cases = [(gc, f) for gc in ("layer", "end") for f in (0, 1)]
pred, meas = {}, {c: [] for c in cases}
for gc, f in cases:
    out = subprocess.run(["./starconv-plan", "--model", "models/%s.cfg" % model, "--ranks", ranks, "--batch", batch,
                          "--workers", "1", "--calibration", cal, "--json", "--parallel", grid, "--grad-comm", gc,
                          "--fc-replicate", str(f)], stdout=subprocess.PIPE, check=True, text=True).stdout
    pred[(gc, f)] = json.loads(out)["time"]
metrics = os.path.abspath("fc-replicate-metrics.jsonl")
for r in range(rounds):
    for gc, f in cases:
        net = [] if rate == "none" else ["bench/slow-net", "--rate", rate, "--"]
        cmd = net + ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
               ranks, "./starconv-train", "--model", "models/%s.cfg" % model, "--data", "/usr/share/datasets/fashion-mnist",
               "--batch", batch, "--iters", "20", "--log-every", "4", "--test", "off", "--shuffle", "off",
               "--parallel", grid, "--grad-comm", gc, "--fc-replicate", str(f), "--metrics", metrics]
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                       stdin=subprocess.DEVNULL)
        with open(metrics) as fp:
            rates = [json.loads(l)["images_per_s"] for l in fp if "images_per_s" in l]
        os.unlink(metrics)
        meas[(gc, f)].append(int(batch) / statistics.median(rates[1:]))
        print("round %d, %-5s --fc-replicate %d: %.2f ms" % (r + 1, gc, f, 1e3 * meas[(gc, f)][-1]), flush=True)
print("\n%-5s %-14s %10s %10s %6s" % ("grad", "fc-replicate", "predicted", "measured", "ratio"))
for c in cases:
    m = statistics.median(meas[c])
    print("%-5s %-14d %8.1fms %8.1fms %6.2f" % (c[0], c[1], 1e3 * pred[c], 1e3 * m, m / pred[c]))
