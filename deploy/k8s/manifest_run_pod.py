"""The pods of manifest_run (deploy/k8s/manifest_run.py): one pod's
containers started as local processes with their command, args and env
mapped from the image's world (Translator), probed on kubelet's schedule
(ProbeState, run_probe), restarted with kubelet's back-off, and killed
kubelet's way (preStop → SIGTERM → grace → SIGKILL, a Termination record).
A Pod needs a cluster object with `workdir`, `image_map`, `max_restarts`
and `dns_target(name, port)` (manifest_run.Cluster)."""
import dataclasses
import http.client
import os
import re
import signal
import socket
import subprocess
import threading
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

PROBE_KINDS = ("startupProbe", "readinessProbe", "livenessProbe")
PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1,
                  "successThreshold": 1, "failureThreshold": 3}
DEFAULT_GRACE = 30          # terminationGracePeriodSeconds when unset
MIN_GRACE = 2               # kubelet's minimum grace left after a preStop
CRASH_BACKOFF = 10          # kubelet's first restart back-off, doubling...
CRASH_BACKOFF_CAP = 300     # ...up to this
INIT_TIMEOUT = 600          # bound on one init container
POLL = 0.2                  # seconds between looks at a process
DNS_TARGET = re.compile(r"dns:///([A-Za-z0-9.-]+):(\d+)")


class Unsupported(Exception):
    """A manifest uses something this runner does not model (named)."""


class Translator:
    """Maps one container's strings from the image's world to this machine
    (the rules of the module doc): paths by prefix, 0.0.0.0 → the pod IP,
    declared containerPorts of port flags → remapped ports, dns:/// Service
    names → the cluster DNS (`dns_target(name, port)`, None: unchanged)."""

    def __init__(self, ip, ports, prefixes, dns_target):
        self.ip, self.ports, self.dns_target = ip, ports, dns_target
        self.prefixes = sorted(prefixes.items(), key=lambda kv: -len(kv[0]))

    def path(self, v):
        for image, host in self.prefixes:
            if v == image or v.startswith(image + "/"):
                return host + v[len(image):]
        return v

    def value(self, key, v):
        """`v` given to the flag or env var `key` (lower case, no dashes)."""
        if v in ("0.0.0.0", "::", "[::]"):
            return self.ip
        if key.endswith("port") and v.isdigit() and int(v) in self.ports:
            return str(self.ports[int(v)])
        v = DNS_TARGET.sub(lambda m: self.dns_target(m.group(1), int(m.group(2))) or m.group(0), v)
        return self.path(v)

    def args(self, words):
        """Command words: `--flag=V` and `--flag V` values, and bare paths."""
        out, flag = [], ""
        for w in words:
            if w.startswith("-") and "=" in w:
                name, v = w.split("=", 1)
                out.append(f"{name}={self.value(name.lstrip('-').lower(), v)}")
                flag = ""
            elif w.startswith("-"):
                out.append(w)
                flag = w.lstrip("-").lower()
            else:
                out.append(self.value(flag, w))
                flag = ""
        return out


def expand(word, env):
    """Kubernetes' $(VAR) expansion in command/args ($$ escapes)."""
    return re.sub(r"\$\$|\$\((\w+)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), word)


@dataclasses.dataclass
class ProbeState:
    """One probe of one container: its settings (kubelet's defaults filled
    in) and its results; consecutive counts restart with each process."""
    kind: str
    spec: dict
    successes: int = 0
    failures: int = 0
    consecutive_ok: int = 0
    consecutive_failed: int = 0
    last: str = "not run"

    def record(self, ok, detail):
        self.last = ("ok: " if ok else "failed: ") + detail
        if ok:
            self.successes, self.consecutive_ok, self.consecutive_failed = (
                self.successes + 1, self.consecutive_ok + 1, 0)
        else:
            self.failures, self.consecutive_failed, self.consecutive_ok = (
                self.failures + 1, self.consecutive_failed + 1, 0)


def run_probe(spec, host, port_of, env, translator):
    """(ok, detail) of one probe against the pod at `host`; `port_of` maps a
    probe port (name or number) to the host port. Bounded by timeoutSeconds."""
    timeout = spec["timeoutSeconds"]
    try:
        if "exec" in spec:
            argv = [expand(w, env) for w in translator.args(spec["exec"]["command"])]
            p = subprocess.run(argv, env=env, capture_output=True, timeout=timeout)
            return p.returncode == 0, f"exec {argv} exited {p.returncode}"
        if "tcpSocket" in spec:
            port = port_of(spec["tcpSocket"]["port"])
            socket.create_connection((host, port), timeout).close()
            return True, f"tcp {host}:{port} connected"
        if "httpGet" in spec:
            return probe_http(host, port_of(spec["httpGet"]["port"]), spec["httpGet"], timeout)
        if "grpc" in spec:
            return probe_grpc(host, port_of(spec["grpc"]["port"]), spec["grpc"], timeout)
    except subprocess.TimeoutExpired:
        return False, f"exec timed out after {timeout} s"
    except (OSError, http.client.HTTPException) as e:
        return False, f"{type(e).__name__}: {e}"
    raise Unsupported(f"probe kind of {sorted(spec)}")


def probe_http(host, port, get, timeout):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {h["name"]: h["value"] for h in get.get("httpHeaders", [])}
        conn.request("GET", get.get("path", "/"), headers=headers)
        status = conn.getresponse().status
        return 200 <= status < 400, f"GET http://{host}:{port}{get.get('path', '/')} → {status}"
    finally:
        conn.close()


def probe_grpc(host, port, spec, timeout):
    target = f"{host}:{port}"
    options = [("grpc.enable_http_proxy", 0), ("grpc.use_local_subchannel_pool", 1)]
    with grpc.insecure_channel(target, options=options) as ch:
        try:
            r = health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service=spec.get("service", "")), timeout=timeout)
        except grpc.RpcError as e:
            return False, f"grpc health {target}: {e.code().name} {e.details()}"
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)
    return r.status == health_pb2.HealthCheckResponse.SERVING, f"grpc health {target}: {name}"


@dataclasses.dataclass
class Termination:
    """How one container ended. Times are seconds from the start of its
    termination (preStop start); sigterm_at is None when it had already
    exited; exit_code is Popen's (negative: the signal that ended it)."""
    pod: str
    container: str
    grace: float
    prestop: str = "none"
    sigterm_at: float = None
    exited_at: float = None
    exit_code: int = None
    killed: bool = False

    @property
    def drained(self):
        """It exited by itself (any status: Open MPI's mpirun exits 1 for
        having been signalled) within the grace period."""
        return not self.killed and self.exited_at is not None and self.exited_at <= self.grace

    def __str__(self):
        how = "SIGKILLed" if self.killed else f"exited {self.exit_code}"
        term = "-" if self.sigterm_at is None else f"{self.sigterm_at:.1f} s"
        at = "-" if self.exited_at is None else f"{self.exited_at:.1f} s"
        return (f"{self.pod}/{self.container}: preStop {self.prestop}; SIGTERM at {term}; "
                f"{how} at {at} (grace {self.grace} s)")


def kill_session(proc):
    """SIGKILL to the process's whole session (the container's processes)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Container:
    """One container of a pod: its process (restarted on exit, bounded), its
    probes on kubelet's schedule (a supervisor thread) and its kill.
    `started`, `ready` and `ever_ready` are plain attributes read by other
    threads; the supervisor writes them (kill() also clears `ready`)."""

    def __init__(self, pod, spec):
        self.pod, self.spec, self.name = pod, spec, spec["name"]
        self.log_path = os.path.join(pod.dir, f"{self.name}.log")
        self.lock = threading.Lock()      # orders launching against kill()
        self.stopping = threading.Event()
        self.proc = None
        self.restarts = 0
        self.exit_codes = []              # of the processes that ended before termination
        self.events = []                  # what the supervisor decided, in order
        self.gave_up = False
        self.started = self.ready = self.ever_ready = False
        self.probes = {k: ProbeState(k, {**PROBE_DEFAULTS, **spec[k]})
                       for k in PROBE_KINDS if k in spec}
        self.translator = pod.translator(spec)
        self.env = None                   # made at the first launch (Services exist then)
        self.thread = threading.Thread(target=self._supervise, daemon=True)

    def start(self):
        self.thread.start()

    def _launch(self):
        """Starts the process unless termination began; False then."""
        with self.lock:
            if self.stopping.is_set():
                return False
            for p in self.probes.values():
                p.consecutive_ok = p.consecutive_failed = 0
            if self.env is None:
                self.env = self.pod.environment(self.spec, self.translator)
            self.proc = self.pod.spawn(self.spec, self.translator, self.env, self.log_path)
            return True

    def _supervise(self):
        """The supervisor thread: _restart_loop; a runner error (a binary
        missing, an unsupported field) gives up at once, named in events."""
        try:
            self._restart_loop()
        except (OSError, Unsupported, KeyError, ValueError) as e:
            self.events.append(f"error: {type(e).__name__}: {e}")
            self.ready = False
            self.gave_up = True

    def _restart_loop(self):
        """restartPolicy Always, bounded: relaunch after kubelet's back-off
        until the cluster's max_restarts, then give up (CrashLoopBackOff)."""
        limit = self.pod.cluster.max_restarts
        for attempt in range(limit + 1):
            if not self._launch():
                return
            verdict = self._probe_until_exit()
            if verdict == "stopping":
                return
            if verdict != "exited":
                self.events.append(f"{verdict} failed: killed to restart")
                self._kill(self.proc, self.pod.grace)
            self.exit_codes.append(self.proc.returncode)
            self.events.append(f"process ended with {self.proc.returncode}")
            if attempt == limit:
                break
            if self.stopping.wait(min(CRASH_BACKOFF_CAP, CRASH_BACKOFF * 2 ** attempt)):
                return
            self.restarts += 1
        self.gave_up = True
        self.events.append(f"gave up after {limit} restarts (CrashLoopBackOff)")

    def _probe_until_exit(self):
        """This process's probes until it exits ("exited"), a startup or
        liveness probe fails past its threshold (its kind), or termination
        begins ("stopping"). Readiness and liveness start right after the
        startup probe succeeds, then tick at their own periods."""
        t0 = time.monotonic()
        due = {k: t0 + p.spec["initialDelaySeconds"] for k, p in self.probes.items()}
        self.started = "startupProbe" not in self.probes
        self.ready = self.started and "readinessProbe" not in self.probes
        self.ever_ready |= self.ready
        while not self.stopping.is_set():
            if self.proc.poll() is not None:
                self.ready = False
                return "exited"
            for kind in self._active():
                if due[kind] <= time.monotonic():
                    if self._probe(kind):
                        return kind
                    due[kind] = time.monotonic() + self.probes[kind].spec["periodSeconds"]
            next_due = min((due[k] for k in self._active()), default=time.monotonic() + POLL)
            self.stopping.wait(max(0.0, min(POLL, next_due - time.monotonic())))
        return "stopping"

    def _active(self):
        if not self.started:
            return ["startupProbe"]
        return [k for k in ("readinessProbe", "livenessProbe") if k in self.probes]

    def _probe(self, kind):
        """Runs one probe and applies its verdict; True when the container
        must be killed (startup or liveness past failureThreshold)."""
        state = self.probes[kind]
        ok, detail = run_probe(state.spec, self.pod.ip, self.pod.host_port, self.env,
                               self.translator)
        if self.stopping.is_set():
            return False  # a result that raced termination decides nothing
        state.record(ok, detail)
        past_threshold = state.consecutive_failed >= state.spec["failureThreshold"]
        if kind == "startupProbe" and ok:
            self.started = True
            self.ready = "readinessProbe" not in self.probes
        elif kind == "readinessProbe":
            if state.consecutive_ok >= state.spec["successThreshold"]:
                self.ready = True
            elif past_threshold:
                self.ready = False
        self.ever_ready |= self.ready
        return kind != "readinessProbe" and not ok and past_threshold

    def kill(self):
        """Pod termination: no more probes or restarts, then _kill."""
        with self.lock:
            self.stopping.set()
            proc = self.proc
        self.ready = False
        return self._kill(proc, self.pod.grace)

    def _kill(self, proc, grace):
        """Kubelet's kill of `proc`: preStop bounded by `grace`, SIGTERM, the
        rest of the grace (at least MIN_GRACE), SIGKILL to the session.
        Returns the Termination."""
        rec = Termination(self.pod.name, self.name, grace)
        t0 = time.monotonic()
        if proc is None:
            rec.prestop = "not run (never started)"
            return rec
        hook = self.spec.get("lifecycle", {}).get("preStop")
        if hook and proc.poll() is None:
            rec.prestop = self._run_prestop(hook, grace)
        left = max(grace - (time.monotonic() - t0), MIN_GRACE)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            rec.sigterm_at = time.monotonic() - t0
            try:
                proc.wait(left)
            except subprocess.TimeoutExpired:
                kill_session(proc)
                proc.wait(30)
                rec.killed = True
        rec.exited_at = time.monotonic() - t0
        rec.exit_code = proc.returncode
        kill_session(proc)  # the container goes: so do its other processes
        return rec

    def _run_prestop(self, hook, grace):
        if "exec" not in hook:
            raise Unsupported(f"{self.pod.name}/{self.name}: preStop {sorted(hook)}")
        t0 = time.monotonic()
        argv = [expand(w, self.env) for w in self.translator.args(hook["exec"]["command"])]
        p = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            code = p.wait(grace)
        except subprocess.TimeoutExpired:
            kill_session(p)
            p.wait(30)
            return f"{argv} cut at the grace period ({grace} s)"
        return f"{argv} exited {code} after {time.monotonic() - t0:.1f} s"

    def describe(self):
        """Lines for the cluster report."""
        state = ("gave up" if self.gave_up else "running" if self.proc and self.proc.poll() is None
                 else "not running")
        lines = [f"  {self.name}: {state}, started={self.started}, ready={self.ready}, "
                 f"restarts={self.restarts}, exits={self.exit_codes}"]
        for kind, p in self.probes.items():
            lines.append(f"    {kind}: {p.successes} ok / {p.failures} failed "
                         f"({p.consecutive_failed} in a row); last {p.last}")
        lines += [f"    event: {e}" for e in self.events]
        return lines


class Pod:
    """One pod of a Deployment: its IP, remapped ports and volume dirs; runs
    its init containers, then its containers (a start thread)."""

    def __init__(self, name, template, ip, ports, cluster):
        self.name, self.ip, self.ports, self.cluster = name, ip, ports, cluster
        self.labels = template.get("metadata", {}).get("labels", {})
        spec = template["spec"]
        self.grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE)
        self.dir = os.path.join(cluster.workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.volumes = {v["name"]: cluster.image_map.volumes.get(v["name"])
                        or self._fresh_dir(v["name"]) for v in spec.get("volumes", [])}
        self.declared = {p.get("name"): p["containerPort"]
                         for c in spec["containers"] for p in c.get("ports", [])}
        self.init_specs = spec.get("initContainers", [])
        self.containers = [Container(self, c) for c in spec["containers"]]
        self.phase, self.init_log = "Pending", []
        self.terminating = False
        self.init_proc = None
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _fresh_dir(self, volume):
        path = os.path.join(self.dir, "volumes", volume)
        os.makedirs(path, exist_ok=True)
        return path

    @property
    def ready(self):
        return (not self.terminating and self.phase == "Running"
                and all(c.ready for c in self.containers))

    @property
    def failed(self):
        return self.phase == "Init:Error" or any(c.gave_up for c in self.containers)

    def host_port(self, port):
        """A probe's or Service's port (name or number) → the port on this
        machine; an undeclared number is used as it is (as Kubernetes does)."""
        if isinstance(port, str) and not port.isdigit():
            if port not in self.declared:
                raise Unsupported(f"{self.name}: no container port named {port!r}")
            port = self.declared[port]
        return self.ports.get(int(port), int(port))

    def translator(self, spec):
        prefixes = dict(self.cluster.image_map.image_dirs)
        for m in spec.get("volumeMounts", []):
            prefixes[m["mountPath"]] = self.volumes[m["name"]]
        return Translator(self.ip, self.ports, prefixes, self.cluster.dns_target)

    def environment(self, spec, translator):
        env = {"PATH": self.cluster.image_map.bin_dir + os.pathsep + os.environ.get("PATH", ""),
               "HOME": self.dir, "HOSTNAME": self.name, "PIP_NO_INDEX": "1"}
        if os.geteuid() == 0:
            # The pod runs as a non-root user (securityContext), which a runner
            # started as root does not switch to: Open MPI is told that is fine.
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        for e in spec.get("env", []):
            if "value" not in e:
                raise Unsupported(f"{self.name}/{spec['name']}: env {e['name']} without value")
            env[e["name"]] = translator.value(e["name"].lower(), expand(str(e["value"]), env))
        return env

    def spawn(self, spec, translator, env, log_path):
        """The container's process (own session; stdout+stderr appended to
        its log, as `kubectl logs` shows them)."""
        if "command" not in spec:
            raise Unsupported(f"{self.name}/{spec['name']}: no command (the image's "
                              "entrypoint is not known here)")
        argv = [expand(w, env) for w in translator.args(spec["command"] + spec.get("args", []))]
        with open(log_path, "a") as log:
            log.write(f"--- {' '.join(argv)}\n")
            log.flush()
            return subprocess.Popen(argv, env=env, cwd=self.dir, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def start(self):
        self.thread.start()

    def _run(self):
        self.phase = "Init"
        for spec in self.init_specs:
            try:
                if not self._run_init(spec):
                    return
            except (OSError, Unsupported, KeyError, ValueError) as e:
                self.init_log.append(f"init {spec['name']}: {type(e).__name__}: {e}")
                self.phase = "Init:Error"
                return
        with self.lock:
            if self.terminating:
                return
            self.phase = "Running"
            for c in self.containers:
                c.start()

    def _run_init(self, spec):
        """One init container to completion (bounded); False: the pod stops
        here (terminating, or Init:Error)."""
        tr = self.translator(spec)
        log = os.path.join(self.dir, f"init-{spec['name']}.log")
        with self.lock:
            if self.terminating:
                return False
            self.init_proc = self.spawn(spec, tr, self.environment(spec, tr), log)
        try:
            code = self.init_proc.wait(INIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_session(self.init_proc)
            code = self.init_proc.wait(30)
        self.init_log.append(f"init {spec['name']} exited {code}")
        if code != 0 and not self.terminating:
            self.phase = "Init:Error"
        return code == 0

    def terminate(self):
        """Deletes the pod: out of every Service at once, then each container
        killed kubelet's way, all at the same time. Returns Terminations."""
        with self.lock:
            self.terminating = True
            if self.init_proc is not None and self.init_proc.poll() is None:
                kill_session(self.init_proc)
        records = [None] * len(self.containers)

        def kill(i):
            records[i] = self.containers[i].kill()
        threads = [threading.Thread(target=kill, args=(i,)) for i in range(len(records))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.grace + 60)
        return [r for r in records if r is not None]

    def describe(self):
        lines = [f"pod {self.name} ({self.ip}, ports {self.ports}): {self.phase}, "
                 f"ready={self.ready}" + ("" if not self.init_log else f"; {self.init_log}")]
        for c in self.containers:
            lines += c.describe()
            if not c.ready:
                lines += [f"    log: {l}" for l in log_tail(c.log_path)]
        if self.phase == "Init:Error":
            for spec in self.init_specs:
                lines += [f"    init log: {l}"
                          for l in log_tail(os.path.join(self.dir, f"init-{spec['name']}.log"))]
        return lines


def log_tail(path, lines=8):
    try:
        with open(path, errors="replace") as f:
            return [l.rstrip("\n") for l in f.readlines()[-lines:]]
    except OSError:
        return []
