#!/usr/bin/env python3
"""A stand-in for ssh/sshd in mpi_tcp_launch_test: the remote shell Open MPI's
mpirun uses (--mca plm_rsh_agent) to start its daemon (orted) on each other
"pod", carried over TCP on 127.0.0.0/8 only.

  remote_shell_stub.py serve --bind 127.0.0.2 --port P --home DIR
      One "pod": prints "remote_shell_stub listening on 127.0.0.2:P" once
      bound, then runs each connection's command line with `sh -c` in a fresh
      login-like environment (PATH, HOME=DIR, TMPDIR=DIR/tmp: nothing of the
      caller's environment, no files shared with other pods but what the
      command names), like sshd would.
  remote_shell_stub.py HOST COMMAND...
      The client mpirun runs as `AGENT HOST orted ...`: sends the words joined
      by spaces (ssh's convention: the remote shell parses them) to HOST at
      port $REMOTE_SHELL_STUB_PORT, relays the command's output to stderr and
      exits with its exit code.

Wire format: the client sends one line (the command); the server answers
with frames b"o" + 4-byte length + output bytes, ended by b"x" + 4-byte exit
code. As with sshd without a tty, a command outlives its client, and what it
leaves running outlives the session (Open MPI's daemon detaches itself).
Stdlib only.
"""
import argparse
import os
import socket
import struct
import subprocess
import sys
import threading

CONNECT_TIMEOUT = 10
# Every command a server runs, and what it leaves running (Open MPI's daemon
# detaches from the session), has this variable set to the server's --home:
# how a test finds them.
MARKER = "REMOTE_SHELL_STUB_HOME"


def send_frame(conn, kind, payload):
    conn.sendall(kind + struct.pack("!I", len(payload)) + payload)


def run_session(conn, home):
    """Runs one connection's command; its output and exit code go back."""
    with conn, conn.makefile("rb") as reader:
        command = reader.readline().decode().rstrip("\n")
        if not command:  # a port probe, not a session
            return
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home,
               "TMPDIR": os.path.join(home, "tmp"), "LANG": "C.UTF-8", MARKER: home}
        proc = subprocess.Popen(["sh", "-c", command], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=home, start_new_session=True)
        print(f"remote_shell_stub: ran {command.split()[:1]} as pid {proc.pid}",
              file=sys.stderr, flush=True)
        try:
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                send_frame(conn, b"o", chunk)
        except OSError:
            pass  # the client went away; like sshd (no tty), leave the command be
        code = proc.wait()
        print(f"remote_shell_stub: pid {proc.pid} exited {code}", file=sys.stderr, flush=True)
        try:
            send_frame(conn, b"x", struct.pack("!i", code))
        except OSError:
            pass


def serve(args):
    os.makedirs(os.path.join(args.home, "tmp"), exist_ok=True)
    listener = socket.create_server((args.bind, args.port))
    print(f"remote_shell_stub listening on {args.bind}:{args.port}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=run_session, args=(conn, args.home), daemon=True).start()


def read_exact(conn, n):
    data = b""
    while len(data) < n:
        more = conn.recv(n - len(data))
        if not more:
            raise ConnectionError("remote_shell_stub: the server closed the session")
        data += more
    return data


def client(host, words):
    port = int(os.environ["REMOTE_SHELL_STUB_PORT"])
    with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT) as conn:
        conn.settimeout(None)  # the session lasts as long as the daemon
        conn.sendall((" ".join(words) + "\n").encode())
        while True:
            kind = read_exact(conn, 1)
            (size,) = struct.unpack("!I", read_exact(conn, 4))
            payload = read_exact(conn, size)
            if kind == b"x":
                return struct.unpack("!i", payload)[0]
            sys.stderr.buffer.write(payload)
            sys.stderr.flush()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        parser = argparse.ArgumentParser(description="remote_shell_stub server")
        parser.add_argument("--bind", required=True)
        parser.add_argument("--port", type=int, required=True)
        parser.add_argument("--home", required=True)
        serve(parser.parse_args(sys.argv[2:]))
        return 0
    if len(sys.argv) < 3:
        print("usage: remote_shell_stub.py HOST COMMAND... | serve ...", file=sys.stderr)
        return 2
    return client(sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
