"""A small HTTP/1.1 keep-alive load generator (asyncio), used by the proxy benchmark.

python bench/loadgen.py --port P --path /bytes/100 --connections 50 --seconds 5
prints one JSON line: {"requests", "seconds", "rps", "latency_ms": {"p50", "p95", "p99"}, "errors"}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time


async def worker(port: int, path: str, stop_at: float, latencies: list[float], errors: list[int]) -> None:
    request = f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".encode()
    reader = writer = None
    while time.perf_counter() < stop_at:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            begin = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length, close = 0, False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"connection" and value.strip().lower() == b"close":
                    close = True
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - begin)
            if close:
                writer.close()
                reader = writer = None
        except (OSError, asyncio.IncompleteReadError):
            errors.append(1)
            if writer is not None:
                writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


async def main(port: int, path: str, connections: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors: list[int] = []
    begin = time.perf_counter()
    await asyncio.gather(*(worker(port, path, begin + seconds, latencies, errors) for _ in range(connections)))
    elapsed = time.perf_counter() - begin
    latencies.sort()
    pick = lambda q: round(1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3) if latencies else None
    return {"requests": len(latencies), "seconds": round(elapsed, 3), "rps": round(len(latencies) / elapsed, 1),
            "latency_ms": {"p50": pick(0.50), "p95": pick(0.95), "p99": pick(0.99)}, "errors": len(errors)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/bytes/100")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5)
    args = parser.parse_args()
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run
    print(json.dumps(run(main(args.port, args.path, args.connections, args.seconds))))
