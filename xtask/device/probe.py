#!/usr/bin/env python3
"""Answer times of a daemon's Status (gRPC, unix socket) and GET /metrics (HTTP), each from a
process of its own as a monitor has, beside two controls that touch no daemon: how late a 10 ms
sleep wakes, and the round trip of a unix-socket echo between two processes. A slow answer
that a control also shows at that moment waited for the machine (a core, the sandbox's socket
layer), not for the daemon.

Usage: probe.py SOCKET HTTP_PORT SECONDS NAME. Prints a table, and each slow daemon answer with
the worst control delay around it; writes NAME.json (every sample) under $OUT when set.
Needs grpcio (the GPU machine's image has it)."""

import json
import multiprocessing as mp
import os
import socket
import sys
import time
import http.client

SLOW_S = 0.010
WALL = time.time() - time.monotonic()
PERIOD_S = 0.1


def status_probe(sock, seconds, q):
    import grpc

    # The default :authority of a unix target is the socket's path, which HTTP/2 servers refuse.
    ch = grpc.insecure_channel(f"unix:{sock}", options=[("grpc.default_authority", "localhost")])
    # An empty StatusRequest is zero bytes; the answer is counted, not decoded.
    call = ch.unary_unary("/cuzk.v1.Prover/Status", request_serializer=None, response_deserializer=None)
    call(b"", timeout=10)
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(PERIOD_S)
        t = time.monotonic()
        if len(call(b"", timeout=10)) == 0:
            raise SystemExit("Status answered with no bytes")
        out.append((t, time.monotonic() - t))
    q.put(("Status (gRPC)", out))


def metrics_probe(port, seconds, q):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(PERIOD_S)
        t = time.monotonic()
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read()
        if r.status != 200 or b"cuzk_" not in body:
            raise SystemExit(f"/metrics answered {r.status}, {len(body)} bytes")
        out.append((t, time.monotonic() - t))
    q.put(("GET /metrics (HTTP)", out))


def sleep_control(seconds, q):
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        time.sleep(0.010)
        out.append((t, time.monotonic() - t - 0.010))
    q.put(("control: 10 ms sleep, late by", out))


def echo_control(seconds, q):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.fork() == 0:
        a.close()
        while (m := b.recv(1)) and m != b"q":
            b.sendall(m)
        os._exit(0)
    b.close()
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.020)
        t = time.monotonic()
        a.sendall(b"x")
        if a.recv(1) != b"x":
            raise SystemExit("echo lost")
        out.append((t, time.monotonic() - t))
    a.sendall(b"q")
    os.wait()
    q.put(("control: unix echo between processes", out))


def quantile(v, f):
    return v[min(len(v) - 1, int(f * len(v)))] if v else float("nan")


def main():
    sock, port, seconds, name = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    try:
        import grpc  # noqa: F401  (the Status probe's process imports it again)
    except ImportError:
        raise SystemExit("probe.py needs python3's grpcio (pip install grpcio)")
    q = mp.Queue()
    procs = [
        mp.Process(target=status_probe, args=(sock, seconds, q)),
        mp.Process(target=metrics_probe, args=(port, seconds, q)),
        mp.Process(target=sleep_control, args=(seconds, q)),
        mp.Process(target=echo_control, args=(seconds, q)),
    ]
    for p in procs:
        p.start()
    results = dict(q.get(timeout=seconds + 60) for _ in procs)
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a probe failed (exit {p.exitcode})")
    controls = [v for k, v in results.items() if k.startswith("control")]
    print(f"{name}: {seconds:.0f} s, each probe in a process of its own")
    print(f"  {'probe':40} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'> 10 ms':>8}")
    for k, v in results.items():
        d = sorted(x[1] for x in v)
        slow = sum(1 for x in d if x > SLOW_S)
        print(f"  {k:40} {len(d):6} {quantile(d, .5) * 1e3:8.2f} {quantile(d, .99) * 1e3:8.2f} {d[-1] * 1e3:8.2f} {slow:8}")
    t0 = min(x[0] for v in results.values() for x in v)
    for k, v in results.items():
        if k.startswith("control"):
            continue
        for t, took in v:
            if took <= SLOW_S:
                continue
            # The worst control delay that overlaps this answer's interval.
            worst = max((d for c in controls for (s, d) in c if s <= t + took and s + d + 0.02 >= t), default=0.0)
            print(f"  slow {k}: {took * 1e3:.1f} ms at {t - t0:.2f} s (wall {t + WALL:.3f}); worst control delay then {worst * 1e3:.1f} ms")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], f"{name}.json"), "w") as f:
            json.dump({k: [[t - t0, d] for t, d in v] for k, v in results.items()}, f)


if __name__ == "__main__":
    main()
