#!/usr/bin/env python3
"""Each deadlock variant of the catalogue: its trace shows the waits that never end.

Usage: deadlock_traces.py WSPIPE. For every variant `WSPIPE list` expects to
deadlock, explores it (--json --trace t.json) and reads the Chrome-trace
JSON: one unfinished slice ("ph":"B", category "open") on the track of each
warp the report lists as blocked, starting after that track's last slice,
and one instant event naming the deadlock. A violation variant's slice
carries its rule and message.
"""
import json
import os
import subprocess
import sys
import tempfile


def explore(wspipe, variant, trace):
    p = subprocess.run([wspipe, "explore", variant, "--runs", "500", "--json", "--trace", trace],
                       capture_output=True, text=True)
    if p.returncode != 1:
        sys.exit(f"{variant}: exit status {p.returncode}, expected 1 (found)\n{p.stdout}{p.stderr}")
    with open(trace) as f:
        return json.loads(p.stdout), json.load(f)["traceEvents"]


def check_deadlock(wspipe, variant, trace):
    report, events = explore(wspipe, variant, trace)
    if report["outcome"] != "deadlock":
        return [f"{variant}: outcome {report['outcome']}"]
    errors = []
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    opened = {}
    for e in events:
        if e["ph"] == "B":
            if e.get("cat") != "open" or "(never ends)" not in e["name"]:
                errors.append(f"{variant}: unexpected begin event {e}")
            opened[names.get((e["pid"], e["tid"]), "?")] = e
    blocked = [b["warp"] for b in report["blocked"]]
    if sorted(opened) != sorted(blocked):
        errors.append(f"{variant}: open waits on {sorted(opened)}, blocked warps {sorted(blocked)}")
    for b in report["blocked"]:
        e = opened.get(b["warp"])
        if e is None:
            continue
        if b["object"] and b["object"] not in e["name"]:
            errors.append(f"{variant}: {b['warp']}'s open slice {e['name']!r} does not name {b['object']}")
        if e["args"].get("state") != b["state"]:
            errors.append(f"{variant}: {b['warp']}'s open slice has state {e['args'].get('state')!r}")
        ends = [x["ts"] + x["dur"] for x in events
                if x["ph"] == "X" and (x["pid"], x["tid"]) == (e["pid"], e["tid"])]
        if ends and max(ends) > e["ts"]:
            errors.append(f"{variant}: {b['warp']}'s open slice starts at {e['ts']}, "
                          f"inside a slice ending at {max(ends)}")
    marks = [e for e in events if e["ph"] == "i" and e["name"] == "deadlock: no warp can move"]
    if len(marks) != 1 or marks[0]["args"].get("unfinished_warps") != len(blocked):
        errors.append(f"{variant}: deadlock markers {marks}")
    elif any(e["ts"] > marks[0]["ts"] for e in opened.values()):
        errors.append(f"{variant}: the deadlock marker comes before an open slice")
    return errors


def check_violation(wspipe, variant, trace):
    report, events = explore(wspipe, variant, trace)
    v = report["violations"][0]
    slices = [e for e in events if e.get("cat") == "violation"]
    if len(slices) != 1:
        return [f"{variant}: {len(slices)} violation slices"]
    s = slices[0]
    if s["name"] != "VIOLATION " + v["rule"] or s["args"].get("rule") != v["rule"] \
            or s["args"].get("message") != v["message"]:
        return [f"{variant}: violation slice {s}"]
    return []


def main():
    wspipe = sys.argv[1]
    listing = subprocess.run([wspipe, "list"], capture_output=True, text=True, check=True).stdout
    deadlocks = [line.split()[0] for line in listing.splitlines() if " expect=deadlock " in line]
    if not deadlocks:
        sys.exit("no deadlock variant in the catalogue")
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t.json")
        for variant in deadlocks:
            errors += check_deadlock(wspipe, variant, trace)
        errors += check_violation(wspipe, "ring/over-arrive", trace)
    for e in errors:
        print(e)
    if errors:
        sys.exit(1)
    print(f"open waits shown in the traces of {len(deadlocks)} deadlock variants: {' '.join(deadlocks)}")


if __name__ == "__main__":
    main()
