"""Is a side-by-side release (``convohub release --jobs 2``) faster on this machine than one system at a time?

Runs the same two work items (each: SmolLM2-135M-Instruct decoding, prompt prefill and a LoRA-free training
step, the three kinds of work a release step does) two ways on the same machine, side by side in time:

- one after another, each process on every core (``--jobs 1``);
- both at once, each process on its share of the cores (``--jobs 2``).

Prints each item's seconds both ways and the ratio of wall times (side by side / one after another). Goal:
ratio <= 0.8, else ``--jobs 1`` is the better default for the machine. A machine whose cores share their
execution units (SMT siblings presented as cores) or memory bandwidth gains little.

    python benchmarks/bench_release_jobs.py [--kind all|decode|prefill|train] [--cores 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ITEM = r"""
import json, sys, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from convohub.models import smollm2_path

kind = sys.argv[1]
torch.manual_seed(0)
path = smollm2_path()
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
ids = tok("A user asks the assistant about the weather in Paris, and the assistant answers. " * 16,
          return_tensors="pt").input_ids[:, :256]
seconds = {}
if kind in ("all", "decode"):
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(3):
            model.generate(ids[:, :64], max_new_tokens=48, min_new_tokens=48, do_sample=False)
    seconds["decode"] = time.perf_counter() - start
if kind in ("all", "prefill"):
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(4):
            model(ids.repeat(8, 1))
    seconds["prefill"] = time.perf_counter() - start
if kind in ("all", "train"):
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-5)
    batch = ids.repeat(4, 1)
    start = time.perf_counter()
    for _ in range(3):
        model(batch, labels=batch).loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    seconds["train"] = time.perf_counter() - start
print(json.dumps({"threads": torch.get_num_threads(), **seconds}))
"""


def _start(kind: str, threads: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    return subprocess.Popen([sys.executable, "-c", ITEM, kind], env=env, stdout=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict[str, float]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"a work item failed with exit code {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=["all", "decode", "prefill", "train"], default="all")
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    _result(_start("decode", args.cores))  # converts SmolLM2 once, outside the timings

    start = time.perf_counter()
    serial = [_result(_start(args.kind, args.cores)) for _ in range(2)]
    serial_s = time.perf_counter() - start

    start = time.perf_counter()
    procs = [_start(args.kind, max(1, args.cores // 2)) for _ in range(2)]
    parallel = [_result(p) for p in procs]
    parallel_s = time.perf_counter() - start

    for name, runs in (("one after another", serial), ("side by side", parallel)):
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in runs[0].items() if k != "threads")
        print(f"{name:18} ({runs[0]['threads']} thread(s) each): first item {parts}")
    print(f"wall: one after another {serial_s:.1f} s, side by side {parallel_s:.1f} s, "
          f"ratio {parallel_s / serial_s:.2f} (goal <= 0.8)")


if __name__ == "__main__":
    main()
