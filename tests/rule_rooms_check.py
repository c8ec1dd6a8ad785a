#!/usr/bin/env python3
"""A rule is found in the room its name's prefix names (docs/architecture.md).

Reads every rule name the emulator's runtime reports (backends/emu/runtime/
*.cpp: the rule argument of fail(), both arms of a conditional rule, a
model's returned rule, a rule handed to a room's check) and fails, naming
file:line, when one appears outside the files of its prefix's room, or has a
prefix no room owns.

    tests/rule_rooms_check.py [REPOSITORY_ROOT]
"""
import pathlib
import re
import sys

# prefix -> the files of the room that owns it (docs/architecture.md).
ROOMS = {
    "mbarrier": {"mbarrier.cpp"},
    "cluster": {"barriers.cpp"},
    "named": {"barriers.cpp"},
    "tmem": {"tmem.cpp"},
    "tcgen05": {"tensor_core.cpp"},
    # TMA loads and stores; the coordinate rules both share are the TMA data
    # model's (models.cpp), which the two rooms report.
    "tma": {"tma_load.cpp", "tma_store.cpp", "models.cpp"},
    "clc": {"clc.cpp"},
    "async": {"engines.cpp"},
    "warp": {"warp.cpp", "lanes.cpp"},
    "kernel": {"warp.cpp"},
    "race": {"race.cpp"},
    "smem": {"race.cpp"},
    "launch": {"launch.cpp"},
}

RULE = r'"([a-z0-9]+)\.([a-z0-9]+(?:-[a-z0-9]+)*)"'
PATTERNS = [
    re.compile(r"\bfail\([^,]*,\s*" + RULE),                  # fail(w, "rule", ...
    re.compile(r"\bfail\([^,]*,.*?\?\s*" + RULE + r"\s*:\s*" + RULE),  # fail(w, cond ? "rule" : "rule"
    re.compile(r"return\s*\{\s*" + RULE),                     # a model's {rule, message}
    re.compile(r"\bcheck_cta_pair\([^;]*?" + RULE + r"\s*,\s*loc\)"),  # a rule handed to the cluster room
]


def rules_in(line):
    for pattern in PATTERNS:
        for m in pattern.finditer(line):
            groups = m.groups()
            for i in range(0, len(groups), 2):
                if groups[i] is not None:
                    yield groups[i], groups[i] + "." + groups[i + 1]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    runtime = root / "backends" / "emu" / "runtime"
    bad, seen = [], 0
    for path in sorted(runtime.glob("*.cpp")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("//"):
                continue
            for prefix, rule in rules_in(line):
                seen += 1
                room = ROOMS.get(prefix)
                if room is None:
                    bad.append(f"{path.relative_to(root)}:{number}: {rule}: no room owns the prefix '{prefix}'")
                elif path.name not in room:
                    bad.append(f"{path.relative_to(root)}:{number}: {rule} belongs in {', '.join(sorted(room))}")
    if seen == 0:
        print("rule_rooms_check: no rule found in backends/emu/runtime: the patterns are out of date", file=sys.stderr)
        return 2
    if bad:
        print("\n".join(bad))
        print(f"rule_rooms_check: {len(bad)} rule(s) reported outside their room", file=sys.stderr)
        return 1
    print(f"rule_rooms_check: {seen} rule sites, each in the room its prefix names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
