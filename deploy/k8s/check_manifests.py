#!/usr/bin/env python3
"""Checks tandem's Kubernetes manifests offline: renders every overlay with
`kubectl kustomize`, validates the built-in kinds with
`kubernetes-validate --strict` (a warning, e.g. an unknown kind, fails too),
and applies the project's own rules to what was rendered:

- every Deployment's selector matches its pod labels; every Service and
  PodDisruptionBudget selects some Deployment's pods, and a Service's named
  target ports exist on those pods;
- every container has an image and resource requests and limits; serving
  containers also a startup, readiness and liveness probe, each on a port the
  container declares; pods run as non-root, containers with a read-only root
  filesystem and no privilege escalation;
- every `--flag` a tandem binary is given is one it accepts (asked from the
  binary: `BIN --help`, from --bin-dir);
- terminationGracePeriodSeconds >= the preStop sleep + the drain time the
  pod declares (annotation tandem.dev/drain-seconds).

Usage: check_manifests.py --bin-dir build/bin [OVERLAY_DIR ...]   (default:
every overlay) or --rendered FILE.yaml (one rendered stream). kubectl and
kubernetes-validate come from PATH (scripts/setup-k8s-venv.sh). Exit 1 with
every problem listed.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SERVING_PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def render(overlay):
    p = subprocess.run(["kubectl", "kustomize", overlay], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"kubectl kustomize {overlay} failed: {p.stderr}")
    return p.stdout


def validate(text):
    """kubernetes-validate --strict's complaints about a rendered stream."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    try:
        p = subprocess.run(["kubernetes-validate", "--strict", "--quiet", f.name],
                           capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    lines = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
    if p.returncode != 0 or lines:
        return [f"kubernetes-validate: {l}" for l in lines] or ["kubernetes-validate failed"]
    return []


def accepted_flags(bin_dir, binary, cache={}):
    if binary not in cache:
        p = subprocess.run([os.path.join(bin_dir, binary), "--help"], capture_output=True,
                           text=True, timeout=60)
        cache[binary] = set(re.findall(r"^\s+--([a-z0-9_-]+)", p.stdout + p.stderr, re.M))
    return cache[binary]


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def pod_templates(docs):
    return {d["metadata"]["name"]: d["spec"]["template"] for d in docs
            if d.get("kind") == "Deployment"}


def check_probes(where, c):
    problems = []
    ports = {p.get("name") for p in c.get("ports", [])} | {p["containerPort"]
                                                         for p in c.get("ports", [])}
    for probe in SERVING_PROBES:
        spec = c.get(probe)
        if spec is None:
            problems.append(f"{where}: no {probe}")
            continue
        for kind in ("httpGet", "tcpSocket", "grpc"):
            if kind in spec and spec[kind]["port"] not in ports:
                problems.append(f"{where}: {probe} port {spec[kind]['port']!r} is not a port "
                                f"of the container ({sorted(map(str, ports))})")
    return problems


def check_args(where, c, bin_dir):
    binary = (c.get("command") or [""])[0]
    if not binary.startswith("tandem") or bin_dir is None:
        return []
    known = accepted_flags(bin_dir, binary)
    problems = []
    for arg in c.get("args", []):
        if arg.startswith("--"):
            name = arg[2:].split("=", 1)[0]
            if name not in known and name.replace("-", "_") not in known:
                problems.append(f"{where}: {binary} does not accept --{name}")
    return problems


def check_container(where, c, bin_dir, serving):
    problems = []
    if not c.get("image"):
        problems.append(f"{where}: no image")
    res = c.get("resources", {})
    if not res.get("requests") or not res.get("limits"):
        problems.append(f"{where}: resources need requests and limits")
    sc = c.get("securityContext", {})
    if sc.get("readOnlyRootFilesystem") is not True or sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}: needs readOnlyRootFilesystem true and "
                        "allowPrivilegeEscalation false")
    if serving:
        problems += check_probes(where, c)
    return problems + check_args(where, c, bin_dir)


def check_grace(name, template):
    spec = template["spec"]
    grace = spec.get("terminationGracePeriodSeconds", 30)
    drain = int(template["metadata"].get("annotations", {}).get("tandem.dev/drain-seconds", 0))
    problems = []
    for c in spec["containers"]:
        cmd = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        pre = int(cmd[1]) if len(cmd) == 2 and cmd[0] == "sleep" else 0
        if grace < pre + drain:
            problems.append(f"Deployment {name}: terminationGracePeriodSeconds {grace} < preStop "
                            f"{pre} s + drain {drain} s")
    return problems


def check_deployment(name, d, bin_dir):
    template = d["spec"]["template"]
    problems = []
    if not matches(d["spec"]["selector"].get("matchLabels"), template["metadata"]["labels"]):
        problems.append(f"Deployment {name}: selector does not match the pod labels")
    if template["spec"].get("securityContext", {}).get("runAsNonRoot") is not True:
        problems.append(f"Deployment {name}: pods must set runAsNonRoot")
    for c in template["spec"].get("initContainers", []):
        problems += check_container(f"Deployment {name} init {c['name']}", c, bin_dir, False)
    for c in template["spec"]["containers"]:
        problems += check_container(f"Deployment {name} container {c['name']}", c, bin_dir, True)
    return problems + check_grace(name, template)


def check_selectors(docs):
    templates = pod_templates(docs)
    problems = []
    for d in docs:
        kind, name = d.get("kind"), d["metadata"]["name"]
        if kind == "Service":
            selector = d["spec"].get("selector")
        elif kind == "PodDisruptionBudget":
            selector = d["spec"]["selector"].get("matchLabels")
        else:
            continue
        chosen = [t for t in templates.values() if matches(selector, t["metadata"]["labels"])]
        if not chosen:
            problems.append(f"{kind} {name}: its selector matches no Deployment's pods")
        elif kind == "Service":
            names = {p.get("name") for t in chosen for c in t["spec"]["containers"]
                     for p in c.get("ports", [])}
            for port in d["spec"]["ports"]:
                target = port.get("targetPort")
                if isinstance(target, str) and target not in names:
                    problems.append(f"Service {name}: targetPort {target!r} is no pod port")
    return problems


def check_rendered(text, bin_dir):
    docs = [d for d in yaml.safe_load_all(text) if d]
    problems = validate(text) + check_selectors(docs)
    for d in docs:
        if d.get("kind") == "Deployment":
            problems += check_deployment(d["metadata"]["name"], d, bin_dir)
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", help="the tandem binaries, asked for their flags")
    parser.add_argument("--rendered", help="check this rendered stream instead of overlays")
    parser.add_argument("overlays", nargs="*")
    args = parser.parse_args()
    problems = []
    if args.rendered:
        with open(args.rendered) as f:
            problems = check_rendered(f.read(), args.bin_dir)
    else:
        overlays = args.overlays or sorted(
            os.path.join(HERE, "overlays", o) for o in os.listdir(os.path.join(HERE, "overlays")))
        for overlay in overlays:
            found = check_rendered(render(overlay), args.bin_dir)
            problems += [f"{os.path.basename(overlay)}: {p}" for p in found]
            print(f"{overlay}: {'ok' if not found else f'{len(found)} problems'}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
