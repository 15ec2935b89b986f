#!/usr/bin/env python3
"""Checks tandem's Kubernetes manifests offline: renders every overlay with
`kubectl kustomize`, validates the built-in kinds with
`kubernetes-validate --strict` (a warning, e.g. an unknown kind, fails too),
a LeaderWorkerSet against schemas/leaderworkerset-v1.json (its pod templates
as core/v1 PodTemplates with kubernetes-validate), and applies the project's
own rules to every pod template rendered (Deployments' and LeaderWorkerSets'):

- every Deployment's selector matches its pod labels; every Service and
  PodDisruptionBudget selects some pod template's pods, and a Service's named
  target ports exist on those pods; a LeaderWorkerSet recreates a group that
  lost a pod (its MPI world cannot take a rank back);
- every container has an image and resource requests and limits; serving
  containers also a startup, readiness and liveness probe, each on a port the
  container declares; pods run as non-root, containers with a read-only root
  filesystem and no privilege escalation;
- every `--flag` a tandem binary is given is one it accepts (asked from the
  binary: `BIN --help`, from --bin-dir), also under `mpirun`, whose own
  options are checked against `mpirun --help all` (command_flags.py);
- terminationGracePeriodSeconds >= the preStop sleep + the drain time the
  pod declares (annotation tandem.dev/drain-seconds).

Usage: check_manifests.py --bin-dir build/bin [OVERLAY_DIR ...]   (default:
every overlay) or --rendered FILE.yaml (one rendered stream). kubectl,
kubernetes-validate and mpirun come from PATH, jsonschema from the venv
(scripts/setup-k8s-venv.sh). Exit 1 with every problem listed.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import yaml

import leaderworkerset as lws
from command_flags import check_container_flags

HERE = os.path.dirname(os.path.abspath(__file__))
SERVING_PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def render(overlay):
    p = subprocess.run(["kubectl", "kustomize", overlay], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"kubectl kustomize {overlay} failed: {p.stderr}")
    return p.stdout


def kubernetes_validate(docs):
    """kubernetes-validate --strict's complaints about `docs`."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)
    try:
        p = subprocess.run(["kubernetes-validate", "--strict", "--quiet", f.name],
                           capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    lines = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
    if p.returncode != 0 or lines:
        return [f"kubernetes-validate: {l}" for l in lines] or ["kubernetes-validate failed"]
    return []


def validate(docs):
    """Schema problems: LeaderWorkerSets against their schema, everything else
    (an unknown kind too, which fails) and their pod templates with
    kubernetes-validate."""
    builtin = [d for d in docs if not lws.is_lws(d)]
    problems = []
    for d in docs:
        if lws.is_lws(d):
            problems += lws.schema_problems(d)
            builtin += lws.as_pod_templates(d)
    return kubernetes_validate(builtin) + problems


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def pod_templates(docs):
    """{name: pod template} of every Deployment."""
    return {d["metadata"]["name"]: d["spec"]["template"] for d in docs
            if d.get("kind") == "Deployment"}


def all_pod_templates(docs):
    """{owner: pod template} of every Deployment ("Deployment NAME") and
    LeaderWorkerSet ("LeaderWorkerSet NAME leaderTemplate", ...)."""
    found = {f"Deployment {name}": t for name, t in pod_templates(docs).items()}
    for d in filter(lws.is_lws, docs):
        found.update({f"{lws.KIND} {lws.name_of(d)} {role}": t for role, t in lws.templates(d)})
    return found


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
    return problems + check_container_flags(where, c, bin_dir)


def check_grace(owner, template):
    spec = template["spec"]
    grace = spec.get("terminationGracePeriodSeconds", 30)
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    drain = int(annotations.get("tandem.dev/drain-seconds", 0))
    problems = []
    for c in spec["containers"]:
        cmd = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        pre = int(cmd[1]) if len(cmd) == 2 and cmd[0] == "sleep" else 0
        if grace < pre + drain:
            problems.append(f"{owner}: terminationGracePeriodSeconds {grace} < preStop "
                            f"{pre} s + drain {drain} s")
    return problems


def check_pod(owner, template, bin_dir):
    """The project's rules for one pod template (`owner` names it)."""
    problems = []
    if template["spec"].get("securityContext", {}).get("runAsNonRoot") is not True:
        problems.append(f"{owner}: pods must set runAsNonRoot")
    for c in template["spec"].get("initContainers", []):
        problems += check_container(f"{owner} init {c['name']}", c, bin_dir, False)
    for c in template["spec"]["containers"]:
        problems += check_container(f"{owner} container {c['name']}", c, bin_dir, True)
    return problems + check_grace(owner, template)


def check_deployment(name, d, bin_dir):
    template = d["spec"]["template"]
    problems = []
    if not matches(d["spec"]["selector"].get("matchLabels"), template["metadata"]["labels"]):
        problems.append(f"Deployment {name}: selector does not match the pod labels")
    return problems + check_pod(f"Deployment {name}", template, bin_dir)


def check_selectors(docs):
    templates = all_pod_templates(docs)
    problems = []
    for d in docs:
        kind, name = d.get("kind"), d["metadata"]["name"]
        if kind == "Service":
            selector = d["spec"].get("selector")
        elif kind == "PodDisruptionBudget":
            selector = d["spec"]["selector"].get("matchLabels")
        else:
            continue
        chosen = [t for t in templates.values()
                  if matches(selector, (t.get("metadata") or {}).get("labels") or {})]
        if not chosen:
            problems.append(f"{kind} {name}: its selector matches no pods (of any Deployment "
                            "or LeaderWorkerSet)")
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
    problems = validate(docs) + check_selectors(docs)
    for d in docs:
        if d.get("kind") == "Deployment":
            problems += check_deployment(d["metadata"]["name"], d, bin_dir)
        elif lws.is_lws(d):
            problems += lws.rule_problems(d)
            for role, template in lws.templates(d):
                problems += check_pod(f"{lws.KIND} {lws.name_of(d)} {role}", template, bin_dir)
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
