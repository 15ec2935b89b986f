#!/usr/bin/env python3
"""Eight concurrent streams through AsyncClient. Usage: stream_async.py [HOST:PORT]"""
import asyncio
import sys

from tandem_client import AsyncClient


async def main(address):
    async with AsyncClient(address, timeout=120) as c:
        async def one(i):
            text = [d.text async for d in c.stream(f"Story {i}:", max_tokens=16, seed=i)]
            return "".join(text)
        for i, text in enumerate(await asyncio.gather(*(one(i) for i in range(8)))):
            print(i, repr(text))


asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"))
