#!/usr/bin/python3
"""The data side of tests/bench/run-matrix.sh (standard library only; plots need gnuplot).

  matrix.py row CSV key=value...    append one run's row, reading the JSON files it names
  matrix.py report CSV META OUT.md IMAGES-DIR [DOC-IMAGES-PREFIX]
                                    the markdown section and the PNG plots from a results
                                    CSV and its metadata JSON
  matrix.py insert DOC SECTION.md   put SECTION.md between the bench-matrix markers of DOC
  matrix.py cut CSV RTT RUN         mark the verified runs of one round that the time budget
                                    cut short as "cut": left out of every figure, so that
                                    every cell of that RTT keeps the same number of runs

The CSV holds every run (failed and skipped ones too), so a report can always be
regenerated from it: `tests/bench/run-matrix.sh --report tests/bench/results/X.csv`.
"""

import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections import OrderedDict, defaultdict

MiB = 1 << 20
GiB = 1 << 30

COLUMNS = [
    "date", "rtt_ms", "link", "rate", "group", "tool", "arm", "dest", "run", "order",
    "status", "note", "size_bytes", "seconds", "mib_s",
    "client_cpu_s", "server_cpu_s", "relay_cpu_s",
    "data_segs_out", "bytes_sent", "bytes_per_segment", "snd_mss", "retransmits", "counters_final",
    "stall_share", "queued_share", "samples", "sample_dumps", "sample_interval_us", "sample_max_gap_us",
    "undersampled",
    "sluice_seconds", "sluice_tcp_segments", "sluice_socket_writes", "sluice_tls_records",
    "relay_late_us_p99", "relay_backlogged_releases", "sha256", "expected_sha256", "flags", "command",
]

BEGIN, END = "<!-- bench-matrix:begin -->", "<!-- bench-matrix:end -->"

GROUP_TITLES = OrderedDict([
    ("nbd", "NBD writes"),
    ("nbd-tls", "NBD writes over TLS"),
    ("chunked", "Chunked (one-way)"),
    ("chunked-tls", "Chunked over TLS (one-way)"),
    ("reference", "Rig self-check: reference NBD writer, 16 KiB record-sized writes"),
])
# The arms' stock flags (run-matrix.sh's arm_flags); --arm-flags changes them for a run.
STOCK_FLAGS = {
    "sluice": "", "sluice-A": "--connections 1 --depth 1 --no-nodelay", "sluice-B": "--connections 1 --depth 1",
    "sluice-C": "--connections 1", "sluice-D": "--connections 1 --no-nodelay",
}
ARM_ORDER = ["sluice-A", "sluice-B", "sluice-C", "sluice-D", "sluice", "nbdcopy", "qemu-img", "ref-A", "ref-B", "ref-C", "ref-D"]
ARM_TITLES = {
    "sluice-A": "A stock (`--depth 1 --no-nodelay`)",
    "sluice-B": "B NODELAY only (`--depth 1`)",
    "sluice-C": "C NODELAY + pipelining (`--connections 1`)",
    "sluice-D": "D pipelining only (`--no-nodelay`)",
    "sluice": "Sluice defaults (no flags)",
    "nbdcopy": "nbdcopy (defaults)",
    "qemu-img": "qemu-img convert -n -W -m 16",
    "ref-A": "A: depth 1, Nagle on",
    "ref-B": "B: depth 1, NODELAY",
    "ref-C": "C: depth 8, NODELAY",
    "ref-D": "D: depth 8, Nagle on",
}
DEST_TITLES = {"nbdkit": "nbdkit memory", "sluice": "sluice serve"}
# Said under a group's throughput table.
GROUP_NOTES = {
    "chunked": "One-way streams through the relay: the relay acknowledges the sender's bytes itself (its TCP "
               "connection to the sender is a short local one) and holds up to 64 MiB per direction, so a "
               "one-way sender never waits for the far end: it sees a fast, deep path whatever the RTT, and "
               "the transfer only ends RTT/2 later. The curve against RTT is flat by construction; it shows the "
               "relay's throughput and the fixed RTT/2 offset, not how Chunked fares on a long link "
               "(docs/benchmark-rig.md).",
}
GROUP_NOTES["chunked-tls"] = GROUP_NOTES["chunked"]
TOOL_COLOURS = {"sluice-A": "#d62728", "sluice-B": "#ff7f0e", "sluice-C": "#2ca02c", "sluice-D": "#1f77b4", "sluice": "#17becf",
                "nbdcopy": "#9467bd", "qemu-img": "#7f7f7f",
                "ref-A": "#d62728", "ref-B": "#ff7f0e", "ref-C": "#2ca02c", "ref-D": "#1f77b4"}


def load_json(path):
    if not path or not os.path.exists(path):
        return {}
    text = open(path).read().strip()
    # Tools may print more than one line; the JSON object is the last line that parses.
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return {}


def command_row(args):
    path, pairs = args[0], args[1:]
    values = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        values[key] = value
    row = {c: "" for c in COLUMNS}
    for key in COLUMNS:
        if key in values:
            row[key] = values[key]
    size = int(values.get("size_bytes") or 0)
    seconds = float(values.get("seconds") or 0)
    if row["status"] == "ok" and seconds > 0:
        row["mib_s"] = f"{size / MiB / seconds:.2f}"
    # The harness's own figure (a cgroup's usage_usec) or /usr/bin/time's last line:
    # "%e %U %S" (it prefixes a status line when the command failed).
    client_time = values.get("client_time_file")
    if not row["client_cpu_s"] and client_time and os.path.exists(client_time):
        lines = [l for l in open(client_time).read().splitlines() if l.strip()]
        if lines:
            parts = lines[-1].split()
            if len(parts) == 3:
                try:
                    row["client_cpu_s"] = f"{float(parts[1]) + float(parts[2]):.3f}"
                except ValueError:
                    pass
    sampler = load_json(values.get("sampler_file"))
    for key in ("data_segs_out", "bytes_sent", "bytes_per_segment", "snd_mss", "retransmits",
                "stall_share", "queued_share", "samples"):
        if key in sampler:
            row[key] = sampler[key]
    for key, column in (("dumps", "sample_dumps"), ("effective_interval_us", "sample_interval_us"),
                        ("max_gap_us", "sample_max_gap_us")):
        if key in sampler:
            row[column] = sampler[key]
    for key in ("undersampled", "counters_final"):
        if key in sampler:
            row[key] = "yes" if sampler[key] else "no"
    stats = load_json(values.get("stats_file"))
    for key in ("seconds", "tcp_segments", "socket_writes", "tls_records"):
        if key in stats:
            row["sluice_" + key] = stats[key]
    relay = load_json(values.get("relay_file"))
    if relay:
        up = relay.get("up", {})
        row["relay_late_us_p99"] = up.get("late_us_p99_max", "")
        row["relay_backlogged_releases"] = up.get("backlogged_releases", "")
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(row)


# --- report --------------------------------------------------------------------------


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def rtt_label(rtt):
    return "loopback" if rtt == 0 else f"{rtt:g} ms"


def fmt_rate(x):
    return "-" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:,.1f}")


class Cell:
    """All runs of one (group, tool, dest, rtt)."""

    def __init__(self):
        self.rows = []

    def ok(self):
        return [r for r in self.rows if r["status"] == "ok"]

    def values(self, key):
        return [v for v in (number(r[key]) for r in self.ok()) if v is not None]

    def median(self, key):
        v = self.values(key)
        return statistics.median(v) if v else None

    def range(self, key):
        v = self.values(key)
        return (min(v), max(v)) if v else (None, None)

    def per_gib(self, key):
        out = []
        for r in self.ok():
            cpu, size = number(r[key]), number(r["size_bytes"])
            if cpu is not None and size:
                out.append(cpu / (size / GiB))
        return statistics.median(out) if out else None


def command_report(args):
    csv_path, meta_path, out_path, images_dir = args[:4]
    images_prefix = args[4] if len(args) > 4 else "images"
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    rows = list(csv.DictReader(open(csv_path)))
    cells = defaultdict(Cell)
    rtts = sorted({float(r["rtt_ms"]) for r in rows})
    for r in rows:
        cells[(r["group"], r["tool"], r["dest"], float(r["rtt_ms"]))].rows.append(r)
    groups = [g for g in GROUP_TITLES if any(k[0] == g for k in cells)]
    requested = int(meta.get("runs") or 0)
    # Arms run with --arm-flags: from the metadata, or (older metadata) from the flags
    # column where it differs from the arm's stock flags.
    overrides = dict(meta.get("arm_overrides") or {})
    for r in rows:
        flags = r.get("flags")
        if flags is not None and r["tool"] in STOCK_FLAGS and flags != STOCK_FLAGS[r["tool"]] and r["status"] != "skipped":
            overrides.setdefault(r["tool"], flags)

    def arm_title(tool):
        if tool in overrides:
            name = "Sluice" if tool == "sluice" else f"{tool[-1]} (changed)"
            return f"{name}: `{overrides[tool] or '(no flags)'}` (--arm-flags)"
        return ARM_TITLES.get(tool, tool)

    def incomplete(c):
        return requested and len(c.ok()) < requested

    def arms_of(group):
        seen = {(k[1], k[2]) for k in cells if k[0] == group}
        return sorted(seen, key=lambda a: (ARM_ORDER.index(a[0]) if a[0] in ARM_ORDER else 99, a[1]))

    def baseline(group, dest, rtt):
        c = cells.get((group, "ref-A" if group == "reference" else "sluice-A", dest, rtt))
        return c.median("mib_s") if c else None

    lines = []
    out = lines.append
    out(BEGIN)
    out("## Network matrix: NBD and Chunked writes across round-trip times (issue 6)")
    out("")
    quick = meta.get("mode") == "quick"
    out(f"- Command: `{meta.get('command', '?')}`")
    out(f"- Date: {meta.get('date', '?')}")
    if quick:
        out("- Mode: **quick smoke test** (small image, few arms, "
            f"{meta.get('runs', '?')} run(s) per cell): these are not the issue's benchmark figures")
    else:
        out(f"- Mode: full matrix, {meta.get('runs', '?')} runs per cell")
    if meta.get("budget_cut"):
        out(f"- **Incomplete**: {meta['budget_cut']}; cells with fewer than {requested} verified runs say "
            "\"incomplete\"")
    if overrides:
        out("- **Changed arms** (`--arm-flags`): " +
            "; ".join(f"{t} ran `{f or '(no flags)'}`" for t, f in sorted(overrides.items())))
    out(f"- Machine: {meta.get('machine', '?')}")
    out(f"- Versions: {meta.get('versions', '?')}")
    out(f"- Image: {meta.get('image', '?')}")
    out(f"- Rig: {meta.get('rig', '?')} (docs/benchmark-rig.md)")
    calibration = meta.get("calibration", {})
    if calibration:
        out(f"- Relay calibration: {calibration.get('summary', '')}")
    if meta.get("unavailable"):
        out("- Not measured: " + "; ".join(meta["unavailable"]))
    raw = os.path.abspath(csv_path)
    # The checkout regenerating the report, not the one that ran it.
    root = os.environ.get("SOURCE_ROOT") or meta.get("source_root")
    if root and not os.path.relpath(raw, root).startswith(".."):
        raw = os.path.relpath(raw, root)
    out(f"- Raw results: `{raw}` (regenerate this section: `tests/bench/run-matrix.sh --report {raw}`)")
    failed = [r for r in rows if r["status"] == "fail"]
    verified = [r for r in rows if r["status"] == "ok"]
    cut = sum(1 for r in rows if r["status"] == "cut")
    out(f"- Runs: {len(verified)} verified (SHA-256 of the received image equals the source's), "
        f"{len(failed)} failed, {sum(1 for r in rows if r['status'] == 'skipped')} skipped" +
        (f", {cut} left out (a round the time budget cut short)" if cut else ""))
    out("")

    # Targets.
    out("### Targets")
    out("")
    targets = []
    for group in ("nbd",):
        for dest in ("nbdkit", "sluice"):
            a = cells.get((group, "sluice-A", dest, 0.2))
            c = cells.get((group, "sluice-C", dest, 0.2))
            ma = a.median("mib_s") if a else None
            mc = c.median("mib_s") if c else None
            name = f"veth, 0.2 ms RTT, NBD writes to {DEST_TITLES[dest]}: arm C at least 5x arm A"
            changed = [t for t in ("sluice-A", "sluice-C") if t in overrides]
            if changed:
                targets.append(("NOT MEASURED", f"{name} ({', '.join(changed)} ran with --arm-flags)"))
            elif ma and mc:
                targets.append(("PASS" if mc >= 5 * ma else "FAIL", f"{name} ({mc / ma:.2f}x)"))
            else:
                targets.append(("NOT MEASURED", name))
    for group in groups:
        if group == "reference":
            continue
        for rtt in rtts:
            for dest in ("nbdkit", "sluice"):
                # Sluice's own defaults; CSVs from before that arm existed have only C.
                c = cells.get((group, "sluice", dest, rtt)) or cells.get((group, "sluice-C", dest, rtt))
                peers = [(tool, cells[(group, tool, dest, rtt)]) for tool in ("nbdcopy", "qemu-img")
                         if (group, tool, dest, rtt) in cells]
                peers = [(t, p.median("mib_s")) for t, p in peers if p.median("mib_s") is not None]
                if not peers:
                    continue
                name = f"{GROUP_TITLES[group]}, {rtt_label(rtt)}, to {DEST_TITLES[dest]}: Sluice defaults at least as fast as " + \
                    ", ".join(t for t, _ in peers)
                mc = c.median("mib_s") if c else None
                if mc is None or (c and c.rows[0]["tool"] in overrides):
                    targets.append(("NOT MEASURED", name + (" (it ran with --arm-flags)" if mc is not None else "")))
                    continue
                best_tool, best = max(peers, key=lambda p: p[1])
                verdict = "PASS" if mc >= best else "FAIL"
                targets.append((verdict, f"{name} ({mc:,.0f} vs {best_tool} {best:,.0f} MiB/s, {mc / best:.2f}x)"))
    for verdict, text in targets:
        out(f"- **{verdict}**: {text}")
    out("")

    # Throughput overview, one table per group.
    out("### Throughput")
    out("")
    out("MiB/s of the image (median of the runs; wall clock from the client's start, connection "
        "set-up included, to its exit, or for one-way Chunked to the receiver's exit); in "
        "brackets the ratio to arm A of the same cell and destination.")
    out("")
    for group in groups:
        out(f"#### {GROUP_TITLES[group]}")
        out("")
        out("| Arm | Destination | " + " | ".join(rtt_label(r) for r in rtts) + " |")
        out("|---|---|" + "--:|" * len(rtts))
        for tool, dest in arms_of(group):
            row = []
            for rtt in rtts:
                c = cells.get((group, tool, dest, rtt))
                if not c or not c.rows:
                    row.append("")
                    continue
                m = c.median("mib_s")
                if m is None:
                    statuses = {r["status"] for r in c.rows}
                    row.append("failed" if "fail" in statuses else "cut" if "cut" in statuses else "skipped")
                    continue
                base = baseline(group, dest, rtt)
                ratio = f" ({m / base:.2f}x)" if base else ""
                short = f", incomplete: {len(c.ok())}/{requested} runs" if incomplete(c) else ""
                row.append(f"{fmt_rate(m)}{ratio}{short}")
            out(f"| {arm_title(tool)} | {DEST_TITLES.get(dest, dest)} | " + " | ".join(row) + " |")
        out("")
        if group in GROUP_NOTES:
            out(GROUP_NOTES[group])
            out("")
        plot = f"bench-matrix-{group}.png"
        if plot_group(group, arms_of(group), rtts, cells, os.path.join(images_dir, plot), overrides):
            out(f"![{GROUP_TITLES[group]}: throughput against RTT]({images_prefix}/{plot})")
            out("")

    # Detail.
    out("### Every cell")
    out("")
    # The method, as it was for the runs in this CSV: rows from before the sampler
    # recorded its sampling (sample_interval_us) were taken the old way.
    new_sampler = any(r.get("sample_interval_us") for r in rows)
    runs_text = (f"Runs: verified of attempted, \"incomplete\" when fewer than {requested} were verified. "
                 if requested else "")
    if new_sampler:
        interval = meta.get("sample_interval_us", 1000)
        out(f"Medians over the verified runs; ranges are min-max. {runs_text}CPU is user+system seconds per "
            f"GiB moved, from {meta.get('cpu_source', '?')}, client, server and relay each on their own (the "
            "relay stands in for the network; its CPU is in neither side's). Segments and bytes per segment are "
            "the client's data segments (`tcpi_data_segs_out`, `tcpi_bytes_sent` summed over its sockets, "
            "protocol and TLS overhead included), each socket's final counters (from sock_diag's destroy "
            "notification, or its last sample after the client ended); \"≥\" marks a cell where some were not "
            "final, so lower bounds. Stalls: the share of the client's sockets' established time in which its "
            "kernel held queued data back although the peer's window was open (nothing in flight, or a "
            "sub-MSS tail waiting with congestion-window room: what Nagle does; docs/benchmark-rig.md), from "
            f"`TCP_INFO` samples aimed at one every {interval} µs, each weighted by the time since the previous "
            "one; \"†\" marks a cell with an undersampled run (mean interval over twice the target). The CSV "
            "has every run's number of samples, mean interval and longest gap.")
    else:
        out(f"Medians over the verified runs; ranges are min-max. {runs_text}CPU is user+system seconds per "
            "GiB moved, client from `/usr/bin/time`, server and relay from `/proc/PID/stat`, both in 10 ms "
            "clock ticks (the relay stands in for the network; its CPU is in neither side's). Segments and "
            "bytes per segment are the client's data segments (`tcpi_data_segs_out`, `tcpi_bytes_sent` of its "
            "sockets, protocol and TLS overhead included), the last values the sampler saw: lower bounds, since "
            "a socket's last sample could come before its last bytes. Stalls: the share of `TCP_INFO` samples "
            "(a plain count, not weighted by time) in which the client's kernel held queued data back although "
            "the peer's window was open (nothing in flight, or a sub-MSS tail waiting with congestion-window "
            "room: what Nagle does; docs/benchmark-rig.md). The sampler aimed at one sample per ms but took "
            "far fewer, unrecorded (a dump walked the host's whole TCP hash table: 2-6 ms), so the shares are "
            "indicative.")
    out("")
    out("| Group | RTT | Arm | Destination | Runs | MiB/s | Range | vs A | Client CPU s/GiB | "
        "Server CPU s/GiB | Relay CPU s/GiB | Segments | B/seg | Stalls | Relay p99 late µs |")
    out("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for group in groups:
        for rtt in rtts:
            for tool, dest in arms_of(group):
                c = cells.get((group, tool, dest, rtt))
                if not c or not c.rows:
                    continue
                attempted = [r for r in c.rows if r["status"] not in ("skipped", "cut")]
                if not attempted:
                    note = (f"skipped: {c.rows[0]['note']}" if c.rows[0]["status"] == "skipped"
                            else "cut: its round was cut short by the time budget")
                    out(f"| {GROUP_TITLES[group]} | {rtt_label(rtt)} | {tool} | {DEST_TITLES.get(dest, dest)} | "
                        f"{note} |" + " |" * 10)
                    continue
                runs = f"{len(c.ok())}/{len(attempted)}" + (" incomplete" if incomplete(c) else "")
                lower = any(r.get("counters_final") == "no" for r in c.ok())
                thin = any(r.get("undersampled") == "yes" for r in c.ok())
                m = c.median("mib_s")
                lo, hi = c.range("mib_s")
                base = baseline(group, dest, rtt)
                segs = c.median("data_segs_out")
                bps = c.median("bytes_per_segment")
                stall = c.median("stall_share")
                late = c.median("relay_late_us_p99")
                cpu_c, cpu_s = c.per_gib("client_cpu_s"), c.per_gib("server_cpu_s")
                cpu_r = c.per_gib("relay_cpu_s")
                out("| " + " | ".join([
                    GROUP_TITLES[group], rtt_label(rtt), tool, DEST_TITLES.get(dest, dest), runs,
                    fmt_rate(m), "-" if lo is None else f"{fmt_rate(lo)}-{fmt_rate(hi)}",
                    "-" if not (m and base) else f"{m / base:.2f}x",
                    "-" if cpu_c is None else f"{cpu_c:.2f}",
                    "-" if cpu_s is None else f"{cpu_s:.2f}",
                    "-" if cpu_r is None else f"{cpu_r:.2f}",
                    "-" if segs is None else ("≥" if lower else "") + f"{segs:,.0f}",
                    "-" if bps is None else f"{bps:,.0f}",
                    "-" if stall is None else f"{100 * stall:.1f}%" + (" †" if thin else ""),
                    "-" if late is None or rtt == 0 else f"{late:,.0f}",
                ]) + " |")
    out("")
    if failed:
        out("Failed runs:")
        out("")
        for r in failed:
            out(f"- {r['group']} {rtt_label(float(r['rtt_ms']))} {r['tool']} -> {r['dest']} run {r['run']}: {r['note']}")
        out("")

    # Commands.
    out("### What ran")
    out("")
    for item in meta.get("commands", []):
        out(f"- {item}")
    out("")
    out(END)
    open(out_path, "w").write("\n".join(lines) + "\n")


def plot_group(group, arms, rtts, cells, png, overrides={}):
    """Throughput against RTT, one line per arm and destination, min-max error bars."""
    if not arms or len(rtts) < 1:
        return False
    series = []
    for tool, dest in arms:
        points = []
        for i, rtt in enumerate(rtts):
            c = cells.get((group, tool, dest, rtt))
            m = c.median("mib_s") if c else None
            if m is None:
                continue
            lo, hi = c.range("mib_s")
            points.append((i, m, lo, hi))
        if points:
            name = f"{tool} [{overrides[tool]}]" if tool in overrides else tool
            series.append((f"{name} -> {DEST_TITLES.get(dest, dest)}", tool, dest, points))
    if not series:
        return False
    os.makedirs(os.path.dirname(png) or ".", exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for n, (title, tool, dest, points) in enumerate(series):
            data = os.path.join(tmp, f"s{n}.dat")
            with open(data, "w") as f:
                for i, m, lo, hi in points:
                    f.write(f"{i} {m} {lo} {hi}\n")
            # One colour per tool, one dash style per destination.
            colour = TOOL_COLOURS.get(tool, "#000000")
            dash = 1 if dest == "nbdkit" else 2
            plots.append(f"'{data}' using 1:2:3:4 with yerrorlines title '{title}' lw 2 lc rgb '{colour}' dt {dash}")
        xtics = ", ".join(f'"{rtt_label(r)}" {i}' for i, r in enumerate(rtts))
        script = f"""
set terminal pngcairo size 1000,600 noenhanced font ',10'
set output '{png}'
set title '{GROUP_TITLES[group]}: throughput against round-trip time (median, min-max bars)'
set xlabel 'round-trip time (loopback = no network; others: veth MTU 1500 + delay relay)'
set ylabel 'MiB/s (log scale)'
set logscale y
set grid ytics mytics xtics
set key outside right top
set xrange [-0.3:{len(rtts) - 0.7}]
set xtics ({xtics})
plot {', '.join(plots)}
"""
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True, timeout=60)
        except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            print(f"matrix.py: gnuplot failed for {png}: {getattr(e, 'stderr', e)}", file=sys.stderr)
            return False
    return True


def command_insert(args):
    doc, section_path = args
    section = open(section_path).read().rstrip("\n")
    if os.path.exists(doc):
        text = open(doc).read()
    else:
        text = ("# Benchmarks\n\nMeasured results, each with the command that produced it, the date and the "
                "machine.\n")
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    open(doc, "w").write(text)


def command_cut(args):
    path, rtt, run = args
    rows = list(csv.DictReader(open(path)))
    fields = list(rows[0].keys()) if rows else COLUMNS
    for r in rows:
        if float(r["rtt_ms"]) == float(rtt) and r["run"] == run and r["status"] == "ok":
            r["status"] = "cut"
            r["note"] = "verified, but its round was cut short by the time budget: left out"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    command, args = sys.argv[1], sys.argv[2:]
    {"row": command_row, "report": command_report, "insert": command_insert, "cut": command_cut}[command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
