#!/usr/bin/env python3
"""Runs one measurement command of bench/cluster_bench.sh and appends its
manifest line: the given key=value fields plus how much of the machine's CPU
other processes used meanwhile (others_cpu_share), so that a number taken
while something else ran on the shared cores can be told apart. "Ours" is
the command with its children and, with --session, every process of that
session (the `tandem up` cluster). Linux /proc only; exits with the
command's exit code.

Usage: measure.py MANIFEST [--session SID] KEY=VALUE... -- COMMAND [ARGS...]
"""
import json
import os
import resource
import subprocess
import sys


def machine_ticks():
    """(busy, total) clock ticks of all CPUs since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def session_ticks(sid):
    """utime + stime ticks of the live processes in session `sid`."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesized command name; session is field 6.
        rest = stat[stat.rindex(")") + 2:].split()
        if int(rest[3]) == sid:
            total += int(rest[11]) + int(rest[12])
    return total


def children_ticks():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * os.sysconf("SC_CLK_TCK")


def main():
    args = sys.argv[1:]
    split = args.index("--")
    options, command = args[:split], args[split + 1:]
    manifest, options = options[0], options[1:]
    sid = None
    if options[:1] == ["--session"]:
        sid, options = int(options[1]), options[2:]
    entry = {}
    for pair in options:
        key, value = pair.split("=", 1)
        entry[key] = int(value) if value.lstrip("-").isdigit() else value
    with open("/proc/loadavg") as f:
        entry["load1_before"] = float(f.read().split()[0])

    busy0, total0 = machine_ticks()
    ours0 = children_ticks() + (session_ticks(sid) if sid else 0)
    code = subprocess.call(command)
    busy1, total1 = machine_ticks()
    ours1 = children_ticks() + (session_ticks(sid) if sid else 0)
    others = max(0.0, (busy1 - busy0) - (ours1 - ours0))
    entry["others_cpu_share"] = others / max(1, total1 - total0)
    entry["exit_code"] = code
    with open(manifest, "a") as f:
        f.write(json.dumps(entry) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
