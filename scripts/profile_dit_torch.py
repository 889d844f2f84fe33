"""Per-op profile of the PyTorch side of `bench dit` (issue 13): runs
`scripts/fixtures/bench_dit_torch.py` with its timing loop replaced by `torch.profiler`, and
prints self CPU time per aten op, summed over the timed forwards (the warm-up forward excluded).

    target/bench-venv/bin/python scripts/profile_dit_torch.py --sfcode target/bench-sfcode \
        --preset small --threads 2 --iters 2 --impl plain
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

# bench_dit_torch.py lives with the fixture scripts, beside this file in scripts/fixtures.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))
import bench_dit_torch as bench  # noqa: E402


def profiled_seconds(iters, f):
    f()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iters):
            f()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    print(f"{'op':<48} {'self CPU ms/forward':>20} {'share':>7}", file=sys.stderr)
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:25]:
        ms = e.self_cpu_time_total / 1000 / iters
        print(f"{e.key:<48} {ms:>20.1f} {e.self_cpu_time_total / total:>7.1%}", file=sys.stderr)
    return total / 1e6 / iters


bench.mean_seconds = profiled_seconds
bench.main()
