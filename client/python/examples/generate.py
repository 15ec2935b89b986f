#!/usr/bin/env python3
"""Greedy completion, then a streamed one, from a coordinator.
Usage: generate.py [HOST:PORT]"""
import sys

from tandem_client import Client

with Client(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051", timeout=120) as c:
    r = c.generate("The capital of France is", max_tokens=8, temperature=0)
    print(repr(r.completions[0].text), r.usage)
    for delta in c.stream("Once upon a time", max_tokens=32, temperature=0):
        print(delta.text, end="", flush=True)
    print()
