#!/usr/bin/env python3
"""A minimal stdlib gRPC client for the integration tests: unary calls over
HTTP/2 with literal HPACK headers (no Huffman coding), a tiny protobuf decoder
and grpc.health.v1 Check. Shared by worker_test.py and draft_test.py."""
import socket
import struct

RPC_TIMEOUT = 10

# HTTP/2 frame types and flags (RFC 9113).
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


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


def grpc_unary(port, path, request=b""):
    """Calls a unary gRPC method on 127.0.0.1:port; returns the response
    message bytes, or raises when the server sends no message."""
    with socket.create_connection(("127.0.0.1", port), timeout=RPC_TIMEOUT) as sock:
        headers = b"".join([
            _literal(":method", "POST"), _literal(":scheme", "http"), _literal(":path", path),
            _literal(":authority", f"127.0.0.1:{port}"),
            _literal("content-type", "application/grpc"), _literal("te", "trailers"),
        ])
        message = b"\x00" + struct.pack(">I", len(request)) + request
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(SETTINGS, 0, 0) +
                     _frame(HEADERS, END_HEADERS, 1, headers) +
                     _frame(DATA, END_STREAM, 1, message))
        data = b""
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
                data += payload
            if stream == 1 and ftype in (DATA, HEADERS) and flags & END_STREAM:
                break
        if len(data) < 5:
            raise ConnectionError(f"{path}: no response message (an error status)")
        size = int.from_bytes(data[1:5], "big")
        return data[5:5 + size]


def parse_proto(buf):
    """Minimal protobuf decoder: {field number: [values]} for varint and
    length-delimited fields."""
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
        else:
            raise ValueError(f"wire type {wire} not handled")
    return fields


def health_status(port, service=""):
    """grpc.health.v1.Health/Check: 1 = SERVING, 2 = NOT_SERVING."""
    request = b"" if not service else b"\x0a" + bytes([len(service)]) + service.encode()
    response = parse_proto(grpc_unary(port, "/grpc.health.v1.Health/Check", request))
    return response.get(1, [0])[0]
