#!/usr/bin/env python3
"""A minimal stdlib gRPC client for the integration tests: unary and
server-streaming calls over HTTP/2 with literal HPACK headers (no Huffman
coding; response headers are not decoded, so a failed call shows as missing
messages), a tiny protobuf encoder and decoder, and grpc.health.v1 Check.
Shared by worker_test.py, draft_test.py and stream_client.py."""
import socket
import struct
import time

RPC_TIMEOUT = 10

# HTTP/2 frame types and flags (RFC 9113).
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
WINDOW_UPDATE = 0x8
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
WINDOW_INCREMENT = 1 << 30


def _frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def _literal(name, value):
    """HPACK literal header field without indexing, new name, no Huffman."""
    out = b"\x00"
    for s in (name.encode(), value.encode()):
        assert len(s) < 127, s
        out += bytes([len(s)]) + s
    return out


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the server")
        buf += chunk
    return buf


def _start_call(port, path, request, timeout):
    """Connects to 127.0.0.1:port and sends one gRPC call (headers, the
    request message, END_STREAM) on stream 1; returns the socket. The
    connection and stream windows are opened wide, so a long response stream
    never stalls on flow control."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    headers = b"".join([
        _literal(":method", "POST"), _literal(":scheme", "http"), _literal(":path", path),
        _literal(":authority", f"127.0.0.1:{port}"),
        _literal("content-type", "application/grpc"), _literal("te", "trailers"),
    ])
    message = b"\x00" + struct.pack(">I", len(request)) + request
    window = struct.pack(">I", WINDOW_INCREMENT)
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(SETTINGS, 0, 0) +
                 _frame(WINDOW_UPDATE, 0, 0, window) +
                 _frame(HEADERS, END_HEADERS, 1, headers) +
                 _frame(WINDOW_UPDATE, 0, 1, window) +
                 _frame(DATA, END_STREAM, 1, message))
    return sock


def _stream_data(sock, path):
    """Yields the payloads of stream 1's DATA frames as they arrive (acking
    SETTINGS and PING on the way) until the stream ends."""
    while True:
        head = _recv_exact(sock, 9)
        length = int.from_bytes(head[:3], "big")
        ftype, flags = head[3], head[4]
        stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
        payload = _recv_exact(sock, length)
        if ftype == SETTINGS and not flags & ACK:
            sock.sendall(_frame(SETTINGS, ACK, 0))
        elif ftype == PING and not flags & ACK:
            sock.sendall(_frame(PING, ACK, 0, payload))
        elif ftype in (GOAWAY, RST_STREAM):
            raise ConnectionError(f"{path}: frame type {ftype} from the server")
        elif stream == 1 and ftype == DATA:
            yield payload
        if stream == 1 and ftype in (DATA, HEADERS) and flags & END_STREAM:
            return


def grpc_unary(port, path, request=b""):
    """Calls a unary gRPC method on 127.0.0.1:port; returns the response
    message bytes, or raises when the server sends no message."""
    with _start_call(port, path, request, RPC_TIMEOUT) as sock:
        data = b"".join(_stream_data(sock, path))
    if len(data) < 5:
        raise ConnectionError(f"{path}: no response message (an error status)")
    size = int.from_bytes(data[1:5], "big")
    return data[5:5 + size]


def grpc_server_stream(port, path, request, timeout):
    """Calls a server-streaming gRPC method on 127.0.0.1:port; returns
    [(time.monotonic() when the message was complete, message bytes)] in
    arrival order (empty when the call failed before any message). `timeout`
    bounds every wait for the server."""
    messages = []
    data = b""
    with _start_call(port, path, request, timeout) as sock:
        for payload in _stream_data(sock, path):
            data += payload
            while len(data) >= 5 and len(data) >= 5 + int.from_bytes(data[1:5], "big"):
                size = int.from_bytes(data[1:5], "big")
                messages.append((time.monotonic(), data[5:5 + size]))
                data = data[5 + size:]
    return messages


def encode_varint(v):
    """Protobuf base-128 varint of a non-negative integer."""
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def encode_field(number, wire, payload):
    """One protobuf field: wire 0 takes an int, wire 2 bytes (a string, a
    nested message or packed varints), wire 5 four bytes (a float)."""
    key = encode_varint(number << 3 | wire)
    if wire == 0:
        return key + encode_varint(payload)
    if wire == 2:
        return key + encode_varint(len(payload)) + payload
    assert wire == 5 and len(payload) == 4, (wire, payload)
    return key + payload


def decode_varints(buf):
    """The values of a packed repeated varint field."""
    values, i = [], 0
    while i < len(buf):
        value, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        values.append(value)
    return values


def parse_proto(buf):
    """Minimal protobuf decoder: {field number: [values]}; varints as ints,
    length-delimited fields as bytes, fixed64 / fixed32 as their raw bytes."""
    fields, i = {}, 0

    def varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(buf):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields.setdefault(number, []).append(varint())
        elif wire == 2:
            n = varint()
            fields.setdefault(number, []).append(buf[i:i + n])
            i += n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            fields.setdefault(number, []).append(buf[i:i + n])
            i += n
        else:
            raise ValueError(f"wire type {wire} not handled")
    return fields


def health_status(port, service=""):
    """grpc.health.v1.Health/Check: 1 = SERVING, 2 = NOT_SERVING."""
    request = b"" if not service else b"\x0a" + bytes([len(service)]) + service.encode()
    response = parse_proto(grpc_unary(port, "/grpc.health.v1.Health/Check", request))
    return response.get(1, [0])[0]
