"""The soak test's probes: the coordinator's RSS and thread count from
/proc/PID/status, and its worker groups (healthy, KV blocks in use,
migrations) from ModelInfo through the Python SDK. Monitor samples both
every few seconds on a thread of its own."""
import threading
import time

import tandem_client


def proc_status(pid):
    """{"rss_mib", "threads"} of process `pid` (/proc/PID/status VmRSS,
    Threads), or None once it is gone."""
    values = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "Threads"):
                    values[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if "VmRSS" not in values or "Threads" not in values:
        return None  # a zombie has no VmRSS
    return {"rss_mib": round(values["VmRSS"] / 1024, 2), "threads": values["Threads"]}


class Groups:
    """ModelInfo of the coordinator, as {address: WorkerGroup}; a client of
    its own that never retries, `timeout_s` per call."""

    def __init__(self, address, timeout_s=5.0):
        self._client = tandem_client.Client(
            address, timeout=timeout_s, backoff=tandem_client.Backoff(max_retries=0),
            options=[("grpc.enable_http_proxy", 0), ("grpc.use_local_subchannel_pool", 1)])
        self._lock = threading.Lock()  # the monitor thread and the main thread share it

    def get(self):
        with self._lock:
            return {g.address: g for g in self._client.model_info().worker_groups}

    def wait_healthy(self, addresses, timeout_s, poll_s=0.2):
        """Seconds until every group in `addresses` is healthy, or None when
        that did not happen within `timeout_s`."""
        start = time.monotonic()
        deadline = start + timeout_s
        while time.monotonic() < deadline:
            try:
                groups = self.get()
                if all(a in groups and groups[a].healthy for a in addresses):
                    return time.monotonic() - start
            except tandem_client.TandemError:
                pass
            time.sleep(poll_s)
        return None

    def kv_used(self):
        """{address: num_blocks_used}."""
        return {a: g.num_blocks_used for a, g in self.get().items()}

    def close(self):
        self._client.close()


class Monitor(threading.Thread):
    """Every `interval_s`: one sample {t_s, coordinator {rss_mib, threads},
    workers [{rss_mib, threads} or None], kv_used {address: blocks},
    kv_used_total, healthy {address: bool}} appended to `samples`; a probe
    that fails leaves its field None and its error in "error"."""

    def __init__(self, cluster, groups, clock, interval_s):
        super().__init__(daemon=True)
        self.cluster = cluster
        self.groups = groups
        self.clock = clock
        self.interval_s = interval_s
        self.samples = []
        self._stopping = threading.Event()

    def sample(self):
        s = {"t_s": round(self.clock(), 3),
             "coordinator": proc_status(self.cluster.coordinator.pid),
             "workers": [proc_status(w.pid) if w is not None else None
                         for w in self.cluster.workers],
             "kv_used": None, "kv_used_total": None, "healthy": None}
        try:
            groups = self.groups.get()
            s["kv_used"] = {a: g.num_blocks_used for a, g in groups.items()}
            s["kv_used_total"] = sum(s["kv_used"].values())
            s["healthy"] = {a: g.healthy for a, g in groups.items()}
        except tandem_client.TandemError as e:
            s["error"] = str(e)
        return s

    def run(self):
        # Bounded by stop(); the count bound is a day of samples.
        for _ in range(int(86400 / max(self.interval_s, 0.1))):
            self.samples.append(self.sample())
            if self._stopping.wait(self.interval_s):
                return

    def stop(self):
        self._stopping.set()
        self.join(30)
