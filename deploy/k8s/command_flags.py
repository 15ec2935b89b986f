"""The flags a container gives a program, checked against the program itself
(check_manifests.py): every `--flag` after a tandem binary is one its
`--help` lists, and when the container runs `mpirun ... tandem-worker ...`,
every mpirun option is one `mpirun --help all` lists (its arity there says
which words are option values, so the program is found exactly).
"""
import os
import re
import shutil
import subprocess

HELP_TIMEOUT = 60
# `mpirun --help all` lines: "-c|-np|--np <arg0>   Number of processes ...".
MPIRUN_OPTION = re.compile(r"^\s*(-[\w-]+(?:\|-[\w-]+)*)((?: <arg\d+>)*)", re.M)


def tandem_flags(bin_dir, binary, cache={}):
    """The flag names `BIN --help` lists (without dashes)."""
    if binary not in cache:
        p = subprocess.run([os.path.join(bin_dir, binary), "--help"], capture_output=True,
                           text=True, timeout=HELP_TIMEOUT)
        cache[binary] = set(re.findall(r"^\s+--([a-z0-9_-]+)", p.stdout + p.stderr, re.M))
    return cache[binary]


def mpirun_options(cache={}):
    """{option: number of values} of the mpirun on PATH; None without one."""
    if "options" not in cache:
        mpirun = shutil.which("mpirun")
        cache["options"] = None
        if mpirun:
            # mpirun refuses to print help as root unless told it may run so.
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
            p = subprocess.run([mpirun, "--help", "all"], capture_output=True, text=True,
                               env=env, timeout=HELP_TIMEOUT)
            cache["options"] = {name: arity.count("<arg")
                                for names, arity in MPIRUN_OPTION.findall(p.stdout + p.stderr)
                                for name in names.split("|")}
    return cache["options"]


def after_mpirun(where, argv):
    """(problems, the words after mpirun's options) of `mpirun OPTIONS... PROGRAM ARGS...`."""
    options = mpirun_options()
    if options is None:
        return [], argv[1:]  # no mpirun here to ask: the program is found by name
    problems, i = [], 1
    while i < len(argv) and argv[i].startswith("-"):
        arity = options.get(argv[i])
        if arity is None:
            problems.append(f"{where}: mpirun does not accept {argv[i]}")
            arity = 0
        i += 1 + arity
    return problems, argv[i:]


def check_container_flags(where, container, bin_dir):
    """Problems with the flags of the tandem binary a container runs: directly,
    under mpirun, or as the arguments of a launcher script."""
    argv = list(container.get("command") or []) + list(container.get("args") or [])
    problems = []
    if argv and os.path.basename(argv[0]) == "mpirun":
        problems, argv = after_mpirun(where, argv)
    start = next((i for i, w in enumerate(argv) if os.path.basename(w).startswith("tandem")), None)
    if start is None or bin_dir is None:
        return problems
    binary = os.path.basename(argv[start])
    known = tandem_flags(bin_dir, binary)
    for arg in argv[start + 1:]:
        if arg.startswith("--"):
            name = arg[2:].split("=", 1)[0]
            if name not in known and name.replace("-", "_") not in known:
                problems.append(f"{where}: {binary} does not accept --{name}")
    return problems
