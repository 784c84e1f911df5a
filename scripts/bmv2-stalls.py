#!/usr/bin/env python3
"""Holds a lab's BMv2 switch processes up, as a busy host does (docs/lab.md, "Minimum breach
duration").

Every 1-2 s it stops one switch (2 times in 3) or every switch at once (1 in 3) with SIGSTOP
for 10-30 ms, then lets it go on (SIGCONT); it prints each stall. The draws come from the seed,
so two runs hold the switches up alike.

    sudo scripts/bmv2-stalls.py SEED SECONDS [LAB_NAME]   # LAB_NAME: the lab's --name (kpev:
                                                          # kplane eval lab's default)
"""
import os
import random
import signal
import subprocess
import sys
import time


def switches(name):
    found = subprocess.run(["pgrep", "-f", f"simple_switch_grpc.*{name}"],
                           capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    seed, seconds = int(sys.argv[1]), float(sys.argv[2])
    name = sys.argv[3] if len(sys.argv) == 4 else "kpev"
    rng = random.Random(seed)
    until = time.time() + seconds
    stalls = 0
    while time.time() < until:
        time.sleep(rng.uniform(1.0, 2.0))
        pids = switches(name)
        if not pids:
            continue
        hold = rng.uniform(0.010, 0.030)
        held = pids if rng.random() < 1 / 3 else [rng.choice(pids)]
        signal_all(held, signal.SIGSTOP)
        try:
            time.sleep(hold)
        finally:
            signal_all(held, signal.SIGCONT)
        stalls += 1
        print(f"{time.time():.3f} held {len(held)} of {len(pids)} switches for "
              f"{hold * 1000:.1f} ms", flush=True)
    print(f"{stalls} stalls")


if __name__ == "__main__":
    main()
