#!/usr/bin/env python3
"""Prints the tuning evaluation's table (Markdown) from the results directories of the six
specs: goodput of each configuration, the best of the buffer sweep, tcptune's share of it,
and the buffer memory each needs.

Usage: examples/tuning-evaluation/summarize.py RESULTS_PREFIX   (e.g. results/eval- for
results/eval-lan, results/eval-dc-1g, …)
"""
import csv
import json
import sys

PATHS = [("lan", "LAN 1 Gbit/s × 0.2 ms"), ("dc-1g", "1 Gbit/s × 1.5 ms"),
         ("dc-10g", "10 Gbit/s × 1.6 ms (as 1 Gbit/s × 16 ms)"), ("wan", "100 Mbit/s × 20 ms"),
         ("lfn", "1 Gbit/s × 100 ms"), ("lossy", "50 Mbit/s × 50 ms, 0.1% loss")]


def mib(b):
    return f"{b / 1048576:g} MiB"


def main():
    prefix = sys.argv[1]
    print("| path | start | tuned | ESnet | tcptune | best (sweep) | tcptune / best | tcptune buffers | smallest buffers ≥ 95% of best |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, title in PATHS:
        try:
            rows = list(csv.DictReader(open(f"{prefix}{name}/summary.csv")))
        except FileNotFoundError:
            print(f"| {title} | (not run) | | | | | | | |")
            continue
        by = {r["label"]: r for r in rows}
        # The settings of each labelled point, from the plan.
        plan = json.load(open(f"{prefix}{name}/plan.json"))
        settings = {dict(p["varied"]).get("label"): p["settings"] for p in plan["points"]}
        mean = {k: float(r["mean_bps"]) / 1e6 if r["mean_bps"] else 0.0 for k, r in by.items()}
        sweep = {k: v for k, v in mean.items() if k.startswith("sweep ")}
        best_label = max(sweep, key=sweep.get)
        best = sweep[best_label]
        # The buffer of each configuration (tcp_rmem max on the receiver, tcp_wmem max on the sender).
        def mem(label):
            st = settings[label]
            return (int(st["server.sysctl.net.ipv4.tcp_rmem"].split()[2]),
                    int(st["client.sysctl.net.ipv4.tcp_wmem"].split()[2]))
        enough = [l for l in sweep if sweep[l] >= 0.95 * best]
        smallest = min(enough, key=lambda l: sum(mem(l)))
        t = mean["tcptune"]
        tr, tw = mem("tcptune")
        sr, sw = mem(smallest)
        print(f"| {title} | {mean['start']:.1f} | {mean['tuned']:.1f} | {mean['esnet']:.1f} | {t:.1f} | {best:.1f} ({best_label}) | {100 * t / best:.0f}% | {mib(tr)} rx, {mib(tw)} tx | {mib(sr)} rx, {mib(sw)} tx ({smallest}) |")


if __name__ == "__main__":
    main()
