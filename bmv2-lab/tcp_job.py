"""A job's iterations over plain TCP, for the tests that have the controller
learn a job that announces nothing: a burst of SIZE bytes every PERIOD
seconds on one connection (gloo's traffic, which INT does not carry)."""

import sys

PORT = 47100

SINK = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT})); s.listen(1)
c, _ = s.accept()
while c.recv(65536):
    pass
"""

BURSTS = f"""
import socket, sys, time
dst, n, size, period = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
c = socket.create_connection((dst, {PORT}), timeout=10)
t0 = time.time()
for k in range(n):
    time.sleep(max(0.0, t0 + k * period - time.time()))
    c.sendall(b"x" * size)
c.close()
"""


def start_sink(node):
    """The receiving end, on the Mininet host `node`."""
    return node.popen([sys.executable, "-c", SINK])


def start_bursts(node, dst_ip, bursts, size, period_s):
    """`bursts` bursts of `size` bytes to dst_ip, one every `period_s`."""
    return node.popen([sys.executable, "-c", BURSTS, dst_ip, str(bursts), str(size), str(period_s)])
