#!/usr/bin/env python3
"""manifest_run: a small local "kubelet" that runs tandem's rendered
Kubernetes manifests as processes on 127.0.0.0/8, so CI can prove that what
the manifests say (commands, args, env, probes, preStop, grace) actually
serves and drains.

What it does, per Deployment of the rendered stream (other kinds but Service
are listed in `Cluster.skipped` and not run):
- `replicas` pods, each with its own "pod IP" 127.0.0.N (N from 2 up). Every
  containerPort of a Deployment is remapped to one free port, the same on all
  its pods (a headless Service names one port for every pod).
- initContainers run one after the other to completion first; a failure
  leaves the pod in Init:Error (not retried: a failed fetch does not heal
  here). Then the containers, with command + args + env, restarted with
  kubelet's crash back-off (10 s doubling, bounded count) when they exit.
- Probes as the kubelet polls them: startupProbe alone until it succeeds (its
  failureThreshold reached: the container is killed and restarted), then
  readiness and liveness each at its own period; grpc (grpc.health.v1),
  httpGet (2xx/3xx), tcpSocket and exec. A pod is Ready when all its
  containers are; a container without readinessProbe is ready once started.
- Services: a tiny DNS server on 127.0.0.1 answers a headless Service's name
  with its ready pods' IPs (all running ones with publishNotReadyAddresses);
  a ClusterIP Service gets a TCP forwarder on 127.0.0.1 (kube-proxy) that
  sends each new connection to a ready pod, and its name resolves to
  127.0.0.1.
- Termination as the kubelet's: the pod leaves every Service at once, then
  per container preStop (exec) bounded by terminationGracePeriodSeconds,
  SIGTERM to the main process, the rest of the grace (at least 2 s after a
  preStop, kubelet's minimum), SIGKILL to the container's whole session. What
  happened is returned as `Termination` records.

The image → machine mapping (ImageMap) is the explicit contract:
- bare command names resolve on PATH, which starts with the build's bin dir
  (the image's PATH holds the tandem binaries);
- image paths (/opt/tandem/scripts → the repo's scripts/, /opt/tandem/bin →
  the bin dir) and volume mountPaths (a named volume → a given dir, e.g.
  models → the repo's models/ that already holds the model, so the
  fetch-model init container verifies and downloads nothing; any other
  volume → a fresh dir per pod) are rewritten where they start a command
  word, an argument, a flag's value or an env value;
- `--host=0.0.0.0` (or `::`) → the pod IP; a port flag or *PORT env whose
  value is a declared containerPort → the remapped port; `dns:///SVC:PORT` →
  `dns://127.0.0.1:DNS/SVC:LOCAL` (LOCAL: the remapped target port of a
  headless Service, the forwarder's port of a ClusterIP one); `$(VAR)` in
  command/args expands from the container's env.
- The env is PATH (the bin dir, then this process's PATH), HOME (the pod's
  dir), HOSTNAME (the pod name), PIP_NO_INDEX=1 (a guard: nothing run here
  may download), when run as root OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) (the pod
  itself is non-root), and the spec's plain `value`s; `valueFrom` is refused
  by name.
Departures from the kubelet, on purpose: readiness and liveness are first
probed right when the startup probe passes (not at the next tick); init
containers are not retried. Not modelled: securityContext (user, read-only
root), resources, the image's own files, probe `host` (always the pod IP),
Service environment variables, kinds other than Deployment and Service (a
LeaderWorkerSet is not run).

Files: this one (rendering, the Cluster, the CLI), manifest_run_pod.py (a
pod's containers: translation, probes, restarts, the kill) and
manifest_run_net.py (free ports, the DNS server, the Service forwarder).

Library use: Cluster(render(overlay, venv_bin), ImageMap(...), workdir);
start(); wait_ready(timeout); service_address(); endpoints(); terminate().
CLI: manifest_run.py --overlay DIR --bin-dir build/bin --k8s-venv-bin
.venv-k8s/bin --volume models=models [--replicas NAME=N] [--serve-s S]
runs until Ready, serves S seconds (or until Ctrl-C), then deletes every pod
and exits 0 only when every container exited by itself within its grace.
Needs grpcio + grpcio-health-checking (.venv-test); YAML is parsed by the
k8s venv's python, so this module needs no YAML library.
"""
import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from manifest_run_net import DnsServer, ServiceProxy, free_ports  # noqa: E402
from manifest_run_pod import Pod, Unsupported, kill_session  # noqa: E402

POLL = 0.2  # seconds between looks at the pods
YAML_TO_JSON = ("import json, sys, yaml; "
                "json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)")


class NotReady(Exception):
    """Pods did not all turn Ready in time (or one failed for good); the
    message is the cluster's report: each pod's phase, probes and log tail."""


def render(overlay, venv_bin, timeout=120):
    """The objects `kubectl kustomize OVERLAY` renders, as dicts. kubectl and
    PyYAML come from the venv at `venv_bin` (scripts/setup-k8s-venv.sh)."""
    def run(argv, stdin):
        p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {p.stderr.strip()}")
        return p.stdout
    text = run([os.path.join(venv_bin, "kubectl"), "kustomize", overlay], None)
    return json.loads(run([os.path.join(venv_bin, "python"), "-c", YAML_TO_JSON], text))


@dataclasses.dataclass
class ImageMap:
    """Where the image's files are on this machine (see the module doc)."""
    bin_dir: str
    image_dirs: dict     # image path prefix -> host dir
    volumes: dict        # volume name -> host dir shared by every pod


def default_image_map(source_dir, bin_dir, models_dir):
    """tandem's image layout: scripts under /opt/tandem/scripts, binaries on
    PATH (also /opt/tandem/bin); the `models` volume is `models_dir`."""
    return ImageMap(bin_dir, {"/opt/tandem/scripts": os.path.join(source_dir, "scripts"),
                              "/opt/tandem/bin": bin_dir}, {"models": models_dir})


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class Cluster:
    """The Deployments and Services of a rendered stream, run here (see the
    module doc). Use as a context manager: leaving it SIGKILLs whatever still
    runs and stops the DNS server and the Service forwarders."""

    def __init__(self, docs, image_map, workdir, replicas=None, max_restarts=3, first_ip=2):
        """`replicas` overrides Deployments' counts by name; `max_restarts`
        bounds restarts per container; pods get 127.0.0.<first_ip> on."""
        self.image_map, self.workdir, self.max_restarts = image_map, workdir, max_restarts
        self.services = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service"}
        self.skipped = sorted({d.get("kind") for d in docs} - {"Deployment", "Service"})
        self.pods, self.proxies, self.dns = [], {}, None
        try:
            self._create_pods([d for d in docs if d.get("kind") == "Deployment"],
                              replicas or {}, first_ip)
            self.dns = DnsServer(self.resolve)
            for name, svc in self.services.items():
                if svc["spec"].get("clusterIP") != "None":
                    for sp in svc["spec"]["ports"]:
                        self.proxies[(name, sp["port"])] = ServiceProxy(
                            lambda name=name, port=sp["port"]: self.endpoints(name, port))
        except BaseException:
            self.close()
            raise

    def _create_pods(self, deployments, replicas, first_ip):
        host = first_ip
        for d in deployments:
            name = d["metadata"]["name"]
            count = replicas.get(name, d["spec"].get("replicas", 1))
            if host + count > 255:
                raise Unsupported(f"more than {255 - first_ip} pods")
            ips = [f"127.0.0.{host + i}" for i in range(count)]
            host += count
            template = d["spec"]["template"]
            declared = sorted({p["containerPort"] for c in template["spec"]["containers"]
                               for p in c.get("ports", [])})
            ports = dict(zip(declared, free_ports(ips, len(declared)))) if ips else {}
            self.pods += [Pod(f"{name}-{i}", template, ip, ports, self)
                          for i, ip in enumerate(ips)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def selected(self, service):
        selector = self.services[service]["spec"].get("selector", {})
        return [p for p in self.pods if selects(selector, p.labels)]

    def _service_port(self, service, port):
        """The Service's port entry named or numbered `port` (None: the first)."""
        ports = self.services[service]["spec"]["ports"]
        for sp in ports:
            if port is None or port in (sp["port"], sp.get("name")):
                return sp
        raise KeyError(f"Service {service} has no port {port!r}")

    def endpoints(self, service, port=None):
        """(pod IP, host port) of the Service's endpoints: its ready pods (with
        publishNotReadyAddresses, every running one that is not terminating)."""
        sp = self._service_port(service, port)
        target = sp.get("targetPort", sp["port"])
        everyone = self.services[service]["spec"].get("publishNotReadyAddresses", False)
        return [(p.ip, p.host_port(target)) for p in self.selected(service)
                if p.ready or (everyone and p.phase == "Running" and not p.terminating)]

    def resolve(self, qname):
        """The cluster DNS: SVC (or SVC.anything) → a headless Service's
        endpoint IPs, a ClusterIP Service's forwarder address (127.0.0.1)."""
        service = qname.split(".")[0]
        if service not in self.services:
            return None
        if self.services[service]["spec"].get("clusterIP") != "None":
            return ["127.0.0.1"]
        return sorted({ip for ip, _ in self.endpoints(service)})

    def dns_target(self, name, port):
        """`dns:///NAME:PORT` for a process here, None when NAME:PORT is no
        Service port (left as written)."""
        service = name.split(".")[0]
        try:
            sp = self._service_port(service, port)
        except KeyError:
            return None
        if (service, sp["port"]) in self.proxies:
            local = self.proxies[(service, sp["port"])].port
        else:
            pods = self.selected(service)
            if not pods:
                return None
            local = pods[0].host_port(sp.get("targetPort", sp["port"]))
        return f"dns://127.0.0.1:{self.dns.port}/{name}:{local}"

    def service_address(self, service, port=None):
        """HOST:PORT where a client reaches a ClusterIP Service's port."""
        sp = self._service_port(service, port)
        return f"127.0.0.1:{self.proxies[(service, sp['port'])].port}"

    def start(self):
        for p in self.pods:
            p.start()

    def wait_ready(self, timeout, pods=None):
        """Polls until every pod (of `pods`, default all) is Ready; returns the
        seconds it took. NotReady with the report after `timeout`, or as soon
        as a pod failed for good (Init:Error, a container given up)."""
        pods = self.pods if pods is None else pods
        t0 = time.monotonic()
        while not all(p.ready for p in pods):
            failed = [p.name for p in pods if p.failed]
            waited = time.monotonic() - t0
            if failed or waited > timeout:
                why = f"failed: {failed}" if failed else f"not Ready within {timeout} s"
                raise NotReady(f"pods {why}\n{self.report()}")
            time.sleep(POLL)
        return time.monotonic() - t0

    def terminate(self, pods=None):
        """Deletes `pods` (default all) at once, as `kubectl delete` would;
        returns every container's Termination."""
        pods = self.pods if pods is None else pods
        results = {}
        threads = [threading.Thread(target=lambda p=p: results.update({p.name: p.terminate()}))
                   for p in pods]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(p.grace for p in pods) + 90)
        return [r for p in pods for r in results.get(p.name, [])]

    def report(self):
        lines = [f"DNS 127.0.0.1:{self.dns.port}"]
        for name in self.services:
            lines.append(f"service {name}: endpoints {self.endpoints(name)}")
        for p in self.pods:
            lines += p.describe()
        if self.skipped:
            lines.append(f"not run (kinds): {self.skipped}")
        return "\n".join(lines)

    def close(self):
        """SIGKILLs every process still running (no grace: cleanup), stops DNS
        and the forwarders. Safe to call twice."""
        for p in self.pods:
            with p.lock:
                p.terminating = True
                procs = [p.init_proc]
            for c in p.containers:
                with c.lock:
                    c.stopping.set()
                    procs.append(c.proc)
            for proc in procs:
                if proc is not None and proc.poll() is None:
                    kill_session(proc)
                    proc.wait(30)
        for proxy in self.proxies.values():
            proxy.stop()
        self.proxies = {}
        if self.dns is not None and not self.dns.stopped.is_set():
            self.dns.stop()


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overlay", default=os.path.join(here, "overlays/cpu"))
    ap.add_argument("--bin-dir", default=os.path.join(root, "build/bin"))
    ap.add_argument("--k8s-venv-bin", default=os.path.join(root, ".venv-k8s/bin"))
    ap.add_argument("--volume", action="append", default=[], metavar="NAME=DIR",
                    help="a named volume's dir, shared by every pod (default models=models/)")
    ap.add_argument("--replicas", action="append", default=[], metavar="DEPLOYMENT=N")
    ap.add_argument("--workdir", help="pods' dirs and logs (default: a new temp dir)")
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--serve-s", type=float, default=0,
                    help="seconds to serve once Ready (0: until SIGINT/SIGTERM)")
    args = ap.parse_args(argv)
    image_map = default_image_map(root, os.path.abspath(args.bin_dir),
                                  os.path.join(root, "models"))
    for v in args.volume:
        name, path = v.split("=", 1)
        image_map.volumes[name] = os.path.abspath(path)
    args.replicas = {k: int(n) for k, n in (r.split("=", 1) for r in args.replicas)}
    return args, image_map


def main(argv):
    """Runs an overlay until Ready, serves, deletes every pod; exit 0 when
    every container exited by itself within its grace (whatever its status:
    printed)."""
    args, image_map = parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="manifest-run-")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with Cluster(render(args.overlay, args.k8s_venv_bin), image_map, workdir,
                 args.replicas) as cluster:
        cluster.start()
        try:
            took = cluster.wait_ready(args.ready_timeout)
        except NotReady as e:
            print(e, file=sys.stderr)
            return 1
        print(f"all pods Ready in {took:.1f} s (logs in {workdir})\n{cluster.report()}")
        for (name, port), proxy in cluster.proxies.items():
            print(f"service {name}:{port} at 127.0.0.1:{proxy.port}")
        sys.stdout.flush()
        stop.wait(args.serve_s or None)
        records = cluster.terminate()
        for r in records:
            print(("drained  " if r.drained else "NOT drained  ") + str(r))
        return 0 if all(r.drained for r in records) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
