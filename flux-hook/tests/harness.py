"""Test harness: a real Unix-socket agent and a real interpreter running programs under the hook.

The interpreter is $FLUX_TEST_PYTHON (default: sys.executable). Extra PYTHONPATH entries for the
program (e.g. a pytest unpacked from wheels) come from $FLUX_TEST_PYTHONPATH.

A test that cannot run for lack of something on the machine skips with a reason starting with
MISSING; the Rust wrapper (flux-agent/tests/hook_suite.rs) reports every skip through flux-skip,
and those as failures under FLUX_REQUIRE_ALL=1. Any other skip reason says why the test does not
apply (a back-end it is not about).
"""
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading

# The reason prefix of a skip for lack of something on the machine (see the module doc).
MISSING = "missing: "

HOOK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = shlex.split(os.environ.get("FLUX_TEST_PYTHON", "")) or [sys.executable]


class Agent:
    """Accepts any number of connections; keeps each connection's lines."""

    def __init__(self, path):
        self.path = path
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(16)
        self.conns = []
        self.threads = []
        self.lock = threading.Lock()
        self.stopping = False
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self):
        self.srv.settimeout(0.05)
        while True:
            try:
                c, _ = self.srv.accept()
            except socket.timeout:
                if self.stopping:
                    return  # nothing pending any more
                continue
            except OSError:
                return
            c.settimeout(None)
            c.sendall(b"\x06")  # the agent's word that the peer check passed
            lines = []
            with self.lock:
                self.conns.append(lines)
            t = threading.Thread(target=self._read, args=(c, lines), daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, c, lines):
        # Read raw bytes as fast as possible (a slow reader would throttle the program through
        # the socket buffer); decode at the end.
        chunks = []
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            chunks.append(b)
        c.close()
        for raw in b"".join(chunks).splitlines():
            lines.append(json.loads(raw.decode("utf-8")))

    def close(self):
        # The program has exited: accept what is still queued, then wait for every reader.
        self.stopping = True
        self.acceptor.join()
        for t in list(self.threads):
            t.join(60)
        self.srv.close()


class Run:
    """The result of one traced program: its connections, decoded."""

    def __init__(self, proc, conns):
        self.proc = proc
        self.conns = conns

    @property
    def main(self):
        return self.conns[0]

    def records(self, conn=None):
        conn = self.main if conn is None else conn
        return [r for r in conn if isinstance(r, list)]

    def codes(self, conn=None):
        return {r[1]: r for r in self.records(conn) if r[0] == "C"}

    def events(self, conn=None, file_suffix=None):
        """Records other than C, with the code id replaced by the code's qualname, in order of
        (tid, ts). Only those of code from files ending with file_suffix, if given."""
        codes = self.codes(conn)
        out = []
        for r in self.records(conn):
            if r[0] in ("C", "F", "bye", "ts", "te", "lost", "hx", "wo", "wc"):
                continue
            c = codes[r[3]]
            if file_suffix and not c[2].endswith(file_suffix):
                continue
            out.append([r[0], c[4]] + r[1:3] + r[4:])
        return out


def mkdtemp(test=None):
    """A temporary directory, removed when `test` (a TestCase) finishes."""
    tmp = tempfile.mkdtemp(prefix="flux-hook-test-")
    if test is not None:
        test.addCleanup(shutil.rmtree, tmp, True)
    return tmp


def run(test, source, *, calls="all", config=None, files=None, env=None, args=(), extra_files=None, timeout=120):
    """Run `source` (dedented) as prog.py under the hook; returns a Run.

    config defaults to targeting prog.py with every event."""
    tmp = mkdtemp(test)
    prog = os.path.join(tmp, "prog.py")
    with open(prog, "w") as fh:
        fh.write(textwrap.dedent(source))
    for name, text in (extra_files or {}).items():
        with open(os.path.join(tmp, name), "w") as fh:
            fh.write(textwrap.dedent(text))
    sock = os.path.join(tmp, "agent.sock")
    agent = Agent(sock)
    if config is None:
        config = {"files": files or ["prog.py"]}
    e = dict(os.environ)
    extra = os.environ.get("FLUX_TEST_PYTHONPATH", "")
    e["PYTHONPATH"] = os.pathsep.join(p for p in (HOOK_DIR, extra) if p)
    e["FLUX_HOOK_SOCKET"] = sock
    e["FLUX_HOOK_CALLS"] = calls
    e["FLUX_HOOK_CONFIG"] = json.dumps(config)
    e.pop("PYTEST_PLUGINS", None)
    e.update(env or {})
    cmd = PYTHON + list(args) + ([prog] if not args else [])
    proc = subprocess.run(cmd, cwd=tmp, env=e, capture_output=True, text=True, timeout=timeout)
    agent.close()
    r = Run(proc, agent.conns)
    r.tmp = tmp
    r.prog = prog
    return r


def pythonpath_has(module):
    e = dict(os.environ)
    extra = os.environ.get("FLUX_TEST_PYTHONPATH", "")
    if extra:
        e["PYTHONPATH"] = extra
    p = subprocess.run(PYTHON + ["-c", "import " + module], env=e, capture_output=True)
    return p.returncode == 0


def interp_version():
    out = subprocess.run(
        PYTHON + ["-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
        capture_output=True,
        text=True,
    ).stdout.split()
    return tuple(int(x) for x in out)
