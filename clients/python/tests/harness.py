"""Run the real `foresight controller` for tests: no switches, loopback ports.

The controller needs an endpoint per fabric switch; every switch is given a
loopback port nothing listens on, so it plans and answers NDSP while it
keeps retrying the switches (which is what a controller does before its
fabric is up). Stopped by PID.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import List, Optional, Sequence

REPO_ROOT = Path(__file__).resolve().parents[3]


def find_binary() -> Optional[Path]:
    """$FORESIGHT_BIN, else target/release/foresight of this checkout."""
    env = os.environ.get("FORESIGHT_BIN")
    path = Path(env) if env else REPO_ROOT / "target" / "release" / "foresight"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Controller:
    """One controller process on a small leaf-spine fabric (1 GPU per host)."""

    def __init__(self, binary: Path, workdir: Path, leaves: int = 2, hosts_per_leaf: int = 2):
        self.binary = binary
        self.workdir = workdir
        self.topology = workdir / "fabric.yaml"
        subprocess.run(
            [str(binary), "topo", "generate", "-o", str(self.topology), "leaf-spine",
             "--leaves", str(leaves), "--spines", "2", "--hosts-per-leaf", str(hosts_per_leaf),
             "--gpus-per-host", "1"],
            check=True, capture_output=True,
        )
        text = self.topology.read_text()
        self.switches: List[str] = re.findall(r"^- name: (\S+)\n  role: (?:leaf|spine|superspine)", text, re.M)
        self.hosts: List[str] = re.findall(r"^  ip: ([\d.]+)/\d+", text, re.M)
        dead = free_port()  # nothing listens here: switches stay unreachable
        (workdir / "switches.yaml").write_text(
            "".join(f'{name}: {{addr: "127.0.0.1:{dead}"}}\n' for name in self.switches)
        )
        self.ndsp_port = free_port()
        self.http_port = free_port()
        self.proc: Optional[subprocess.Popen] = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.ndsp_port}"

    def start(self, timeout_s: float = 20.0, extra_args: Sequence[str] = (), wait_ready: bool = True) -> None:
        """Start; wait until it is ready (for a replica: until it leads) unless told not to."""
        ready = self.workdir / "ready.json"
        if ready.exists():
            ready.unlink()
        log = open(self.workdir / "controller.log", "ab")
        self.proc = subprocess.Popen(
            [str(self.binary), "controller", "--topology", str(self.topology),
             "--switches", str(self.workdir / "switches.yaml"), "--switch-wait-s", "0",
             "--state-file", "none", "--ndsp", self.target, "--http", f"127.0.0.1:{self.http_port}",
             "--ready-file", str(ready), *extra_args],
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        if not wait_ready:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited with {self.proc.returncode}; log: {self.log_tail()}")
            if ready.exists():
                try:
                    if json.loads(ready.read_text()).get("pid") == self.proc.pid:
                        return
                except ValueError:
                    pass  # being written
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"controller not ready after {timeout_s} s; log: {self.log_tail()}")

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Stop our process by its PID (SIGKILL by default: a crash, not a goodbye)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def log_tail(self, n: int = 2000) -> str:
        path = self.workdir / "controller.log"
        return path.read_text(errors="replace")[-n:] if path.exists() else "(no log)"


def find_etcd() -> Optional[str]:
    """$FORESIGHT_ETCD, else etcd on PATH (Debian's etcd-server)."""
    name = os.environ.get("FORESIGHT_ETCD", "etcd")
    try:
        subprocess.run([name, "--version"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return name


class Etcd:
    """A one-member etcd on loopback ports, in `workdir`, stopped by PID."""

    def __init__(self, binary: str, workdir: Path):
        client, peer = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{client}"
        log = open(workdir / "etcd.log", "ab")
        self.proc = subprocess.Popen(
            [binary, "--name", "m0", "--data-dir", str(workdir / "etcd"),
             "--listen-client-urls", f"http://{self.endpoint}", "--advertise-client-urls", f"http://{self.endpoint}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"m0=http://127.0.0.1:{peer}",
             "--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap", "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", client), timeout=1) as s:
                    s.sendall(f"GET /health HTTP/1.0\r\nHost: {self.endpoint}\r\n\r\n".encode())
                    if b'"health":"true"' in s.recv(4096):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("etcd not healthy after 20 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
