#!/usr/bin/env python3
"""Writes the experiment specs of the tuning evaluation (issue 8): one spec per path, each
comparing, on a host that starts mistuned, the starting settings, tuned's network-throughput
values, ESnet's, tcptune's recommendation for that path, and a sweep of buffer sizes (the
exhaustive search for the best).

The start is mistuned three ways: an old distribution's buffer defaults, SACK off, and an
application that fixes a small SO_RCVBUF/SO_SNDBUF (iperf3 -w 32K: 64 KiB buffers with
autotuning off). tcptune's recommendation is what `tcptune tune --state STATE --path … --json`
plans for a recorded state of such a lab host (fixtures/host/lab-mistuned-app-6.18.json,
recorded while the application ran), plus what its audit says about the application: where it
warns that the socket's SO_RCVBUF is too small for the path (R5: "remove the setsockopt"), the
tcptune row runs the application without -w. tuned's and ESnet's lists change sysctls only, so
their rows keep the application as it is. The evaluation uses the same code a user runs.

Usage: examples/tuning-evaluation/generate.py [TCPTUNE_BINARY]
"""
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TCPTUNE = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/release/tcptune")
RECORDED = ROOT / "fixtures/host/lab-mistuned-app-6.18.json"
# The evaluation's hosts start with CUBIC as their default, while the host was recorded with
# BBR. The send buffer a sender needs depends on its congestion control (tcp_sndbuf_expand:
# 2× the window, 3× under BBR), and the audit may recommend another control (R13 on a
# loss-limited path), so tcptune is shown the state the evaluation's hosts start in: the
# recording with CUBIC as the default.
CC = "cubic"
# The application's own buffer request (iperf3 -w, on both ends' data sockets).
APP_WINDOW = "32KiB"

# name, rate, RTT, loss, note. Paths above what the emulator carries on two cores are scaled
# (rate ÷ 10, RTT × 10: the BDP, which buffers are compared with, is kept).
# Trials are longer and more numerous where a few events decide a trial: on the long path
# (slow start takes seconds) and the lossy one (a handful of losses per second, each costing
# CUBIC many round trips to recover).
PATHS = [
    ("lan", "1gbit", "0.2ms", None, "a LAN", "4s", 3),
    ("dc-1g", "1gbit", "1.5ms", None, "1 Gbit/s × 1.5 ms datacenter link", "4s", 3),
    ("dc-10g", "1gbit", "16ms", None, "10 Gbit/s × 1.6 ms datacenter link, scaled to 1 Gbit/s × 16 ms", "4s", 3),
    ("wan", "100mbit", "20ms", None, "100 Mbit/s × 20 ms WAN", "4s", 3),
    ("lfn", "1gbit", "100ms", None, "1 Gbit/s × 100 ms long fat path", "12s", 3),
    ("lossy", "50mbit", "50ms", "0.1%", "50 Mbit/s × 50 ms with 0.1% loss", "20s", 3),
]

# The mistuned start: an old distribution's buffer defaults, SACK off.
START = {
    "net.ipv4.tcp_rmem": "4096 87380 6291456",
    "net.ipv4.tcp_wmem": "4096 16384 4194304",
    "net.ipv4.tcp_sack": "0",
    "net.ipv4.tcp_congestion_control": CC,
}
# tuned's network-throughput profile (its per-socket part; net.core.*_max are global).
TUNED = {"net.ipv4.tcp_rmem": "4096 87380 16777216", "net.ipv4.tcp_wmem": "4096 16384 16777216"}
# ESnet fasterdata's Linux host tuning for 10 Gbit/s hosts (its per-socket part).
ESNET = {
    "net.ipv4.tcp_rmem": "4096 87380 33554432",
    "net.ipv4.tcp_wmem": "4096 65536 33554432",
    "net.ipv4.tcp_mtu_probing": "1",
}
SWEEP = [65536, 262144, 1048576, 4194304, 16777216, 67108864]


def size(b):
    for unit, name in ((1 << 20, "M"), (1 << 10, "K")):
        if b >= unit:
            return f"{b // unit}{name}"
    return str(b)


def recommendation(path, fit=False):
    """The sysctls `tcptune tune` plans (with --fit: maxima sized to the path), and the
    application's window after following the audit: "none" (no setsockopt) where it warns
    that the socket's SO_RCVBUF is too small."""
    extra = ["--fit"] if fit else []
    out = subprocess.run(
        [TCPTUNE, "--json", "tune", "--state", str(STATE), "--path", path, "--role", "both"] + extra,
        capture_output=True, text=True, check=True,
    )
    plan = json.loads(out.stdout)["result"]["plan"]
    rec = dict(START)
    for c in plan["changes"]:
        a = c["action"]
        if a["kind"] == "sysctl":
            rec[a["key"]] = a["value"]
    out = subprocess.run(
        [TCPTUNE, "--json", "audit", "--state", str(STATE), "--path", path, "--role", "both"],
        capture_output=True, text=True,
    )
    findings = json.loads(out.stdout)["result"]["findings"]
    app_warned = any(f["rule"] == "R5" and f["setting"].startswith("socket ") for f in findings)
    return rec, ("none" if app_warned else APP_WINDOW)


def main():
    global STATE
    recorded = json.loads(RECORDED.read_text())
    recorded["sysctls"]["net.ipv4.tcp_congestion_control"] = CC
    tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(recorded, tmp)
    tmp.close()
    STATE = tmp.name
    state = recorded["sysctls"]
    for name, rate, rtt, loss, note, duration, reps in PATHS:
        path = f"rate={rate},rtt={rtt}" + (f",loss={loss}" if loss else "")
        rec, rec_window = recommendation(path)
        fit, fit_window = recommendation(path, fit=True)
        # The sweep covers every congestion control a recommendation runs, so that "the best"
        # is searched over what tcptune may change.
        ccs = [CC] + sorted({c["net.ipv4.tcp_congestion_control"] for c in (rec, fit)} - {CC})
        configs = [
            ("start", START),
            ("tuned", {**START, **TUNED}),
            ("esnet", {**START, **ESNET}),
            ("tcptune", rec),
            ("tcptune fit", fit),
        ] + [
            ("sweep " + ("" if cc == CC else cc + " ") + size(b),
             {**START, "net.ipv4.tcp_sack": "1", "net.ipv4.tcp_congestion_control": cc,
              "net.ipv4.tcp_rmem": f"4096 87380 {b}", "net.ipv4.tcp_wmem": f"4096 16384 {b}"})
            for cc in ccs for b in SWEEP
        ]
        keys = sorted({k for _, c in configs for k in c})
        lines = [
            f"# Generated by generate.py: the tuning evaluation on {note}.",
            f'name = "tuning-{name}"',
            f'description = "Mistuned start vs tuned, ESnet, tcptune and a buffer sweep on {note}"',
            "seed = 8", f"repetitions = {reps}", "warmup = false", 'order = "random"',
            # Common random numbers: in one repetition every row meets the same loss draws.
            'seeds = "common"', "",
            "[link]", f'rate = "{rate}"', f'rtt = "{rtt}"',
        ]
        if loss:
            lines.append(f'loss = "{loss}"')
        lines += ["", "[workload]", 'kind = "iperf3"',
                  'direction = "upload"', f'duration = "{duration}"', "", "[[paired]]",
                  "label = [" + ", ".join(f'"{l}"' for l, _ in configs) + "]"]
        for k in keys:
            values = [c.get(k, state.get(k, "")) for _, c in configs]
            for host in ("client", "server"):
                lines.append(f'"{host}.sysctl.{k}" = [' + ", ".join(f'"{v}"' for v in values) + "]")
        # The application: its small buffers in the start, tuned and ESnet rows; in tcptune's
        # row as the audit leaves it; the sweep searches buffers through the sysctls alone.
        windows = [APP_WINDOW, APP_WINDOW, APP_WINDOW, rec_window, fit_window]
        windows += ["none"] * (len(configs) - len(windows))
        lines.append('"workload.window" = [' + ", ".join(f'"{w}"' for w in windows) + "]")
        (HERE / f"{name}.toml").write_text("\n".join(lines) + "\n")
        print(f"{name}: tcptune recommends {rec}, --fit {fit}, application window {rec_window}")
    pathlib.Path(STATE).unlink()


if __name__ == "__main__":
    main()
