"""The network side of manifest_run (deploy/k8s/manifest_run.py) on
127.0.0.0/8: free ports common to several pod IPs, the cluster DNS server
(headless Services → ready pod IPs) and kube-proxy's forwarder for ClusterIP
Services. Stdlib only; every loop ends when its socket closes or its stop
event is set."""
import itertools
import socket
import struct
import threading

POLL = 0.2  # seconds a server thread blocks before looking at its stop event


def free_ports(hosts, count):
    """`count` distinct TCP ports, each free on every address of `hosts` when
    chosen (all are held until the last is found, so none repeats)."""
    held, ports = [], []
    try:
        for _ in range(50 * count):
            if len(ports) == count:
                break
            first = socket.socket()
            first.bind((hosts[0], 0))
            held.append(first)
            port = first.getsockname()[1]
            try:
                for h in hosts[1:]:
                    s = socket.socket()
                    held.append(s)
                    s.bind((h, port))
                ports.append(port)
            except OSError:
                continue
    finally:
        for s in held:
            s.close()
    if len(ports) < count:
        raise RuntimeError(f"no {count} ports free on all of {hosts}")
    return ports


class DnsServer:
    """The cluster DNS: UDP on 127.0.0.1:port, answers A queries with
    `lookup(name)` (a list of IPv4; None or empty: NXDOMAIN, as CoreDNS for a
    headless Service without endpoints); other types an empty NOERROR."""

    def __init__(self, lookup):
        self.lookup = lookup
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(POLL)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                query, peer = self.sock.recvfrom(512)
                self.sock.sendto(self._answer(query), peer)
            except (socket.timeout, IndexError, struct.error, UnicodeDecodeError):
                continue  # no query yet, or a malformed one: no answer
            except OSError:
                return  # closed

    def _answer(self, query):
        qid = struct.unpack(">H", query[:2])[0]
        i, labels = 12, []
        while query[i] != 0:
            labels.append(query[i + 1:i + 1 + query[i]].decode())
            i += 1 + query[i]
        qtype = struct.unpack(">H", query[i + 1:i + 3])[0]
        question = query[12:i + 5]
        addresses = self.lookup(".".join(labels).lower().rstrip("."))
        if not addresses:
            return struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question
        records = addresses if qtype == 1 else []
        answers = b"".join(struct.pack(">HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton(a)
                           for a in records)
        return struct.pack(">HHHHHH", qid, 0x8180, 1, len(records), 0, 0) + question + answers

    def stop(self):
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()


class ServiceProxy:
    """kube-proxy for one port of a ClusterIP Service: listens on
    127.0.0.1:port and joins each new connection to one of `endpoints()`
    (ready pods, round robin). Established connections stay when their pod
    leaves (as conntrack keeps them); with no endpoint a connection is closed
    at once (kube-proxy rejects)."""

    def __init__(self, endpoints):
        self.endpoints = endpoints
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(POLL)
        self.port = self.listener.getsockname()[1]
        self.turn = itertools.count()
        self.lock = threading.Lock()
        self.open = set()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            backends = self.endpoints()
            if not backends:
                client.close()
                continue
            try:
                upstream = socket.create_connection(backends[next(self.turn) % len(backends)], 5)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.settimeout(None)
            with self.lock:
                self.open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, src, dst):
        """Copies src → dst until EOF or an error, then half-closes dst."""
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def stop(self):
        self.stopped.set()
        self.listener.close()
        self.thread.join(5)
        with self.lock:
            for s in self.open:
                s.close()
