#!/usr/bin/env python3
"""Prints the tuning evaluation's table (Markdown) from the results directories of the six
specs: goodput of each configuration, the best of the buffer sweep, tcptune's share of it, and
the buffer memory each uses — configured (the tcp_rmem/tcp_wmem maxima) and measured (the
largest receive buffer of the receiving connection plus the largest send buffer of the sending
one, as autotuning granted them, from the trials' socket-memory samples).

The issue's goal — tcptune reaches at least 95% of the best with no more than 2x the smallest
buffer that reaches it — is judged on measured memory: a maximum costs nothing until autotuning
grants it, so the memory a configuration uses is what its connections were given.

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
    if b >= 1048576:
        return f"{b / 1048576:.3g} MiB"
    return f"{b / 1024:.3g} KiB"


def main():
    prefix = sys.argv[1]
    print("| path | start | tuned | ESnet | tcptune | tcptune --fit | best (sweep) | tcptune / best | --fit / best | smallest ≥ 95% of best: max → used | used: tcptune, --fit (÷ smallest) | goal met by |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, title in PATHS:
        try:
            rows = list(csv.DictReader(open(f"{prefix}{name}/summary.csv")))
        except FileNotFoundError:
            print(f"| {title} | (not run) | | | | | | | | | | |")
            continue
        by = {r["label"]: r for r in rows}
        plan = json.load(open(f"{prefix}{name}/plan.json"))
        settings = {dict(p["varied"]).get("label"): p["settings"] for p in plan["points"]}
        num = lambda r, k: float(r[k]) if r.get(k) else 0.0
        mean = {k: num(r, "mean_bps") / 1e6 for k, r in by.items()}
        sd = {k: num(r, "sd_bps") / 1e6 for k, r in by.items()}
        # Memory used: the receiver's largest sk_rcvbuf plus the sender's largest sk_sndbuf.
        used = {k: num(r, "rcvbuf_peak_bytes_mean") + num(r, "sndbuf_peak_bytes_mean")
                for k, r in by.items()}
        sweep = {k: v for k, v in mean.items() if k.startswith("sweep ")}
        best_label = max(sweep, key=sweep.get)
        best = sweep[best_label]

        def configured(label):
            st = settings[label]
            return (int(st["server.sysctl.net.ipv4.tcp_rmem"].split()[2]),
                    int(st["client.sysctl.net.ipv4.tcp_wmem"].split()[2]))
        enough = [l for l in sweep if sweep[l] >= 0.95 * best]
        smallest = min(enough, key=lambda l: used[l])
        sr, sw = configured(smallest)
        cells, met = [], []
        for row in ("tcptune", "tcptune fit"):
            share = mean[row] / best
            ratio = used[row] / used[smallest] if used[smallest] else float("nan")
            cells.append((share, ratio))
            if share >= 0.95 and ratio <= 2.0:
                met.append("--fit" if row.endswith("fit") else "default")
        print(f"| {title} | {mean['start']:.1f} | {mean['tuned']:.1f} | {mean['esnet']:.1f} "
              f"| {mean['tcptune']:.1f} ± {sd['tcptune']:.1f} | {mean['tcptune fit']:.1f} ± {sd['tcptune fit']:.1f} "
              f"| {best:.1f} ± {sd[best_label]:.1f} ({best_label}) "
              f"| {100 * cells[0][0]:.0f}% | {100 * cells[1][0]:.0f}% "
              f"| {mib(sr)} + {mib(sw)} → {mib(used[smallest])} ({smallest}) "
              f"| {mib(used['tcptune'])} ({cells[0][1]:.1f}×), {mib(used['tcptune fit'])} ({cells[1][1]:.1f}×) "
              f"| {', '.join(met) or 'neither'} |")


if __name__ == "__main__":
    main()
