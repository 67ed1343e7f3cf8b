"""Redis Sentinel for the tests (README "Redis Sentinel"): a master, a
replica and three sentinels of a test's own (quorum 2, down-after 1 s,
failover-timeout 3 s), on free ports in a temp dir, with Debian's
redis-server (`--sentinel`). With a Pki (harness.redis_tls), everything
listens on TLS only (--port 0 --tls-port P, tls-replication yes), so a
plaintext connection anywhere fails."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

from .redis import Redis
from .stack import free_port


class SentinelSet:
    """master, replica: (port, Popen); sentinels: [port]; name: the
    master's name; url(user, password, dead_first): the redis+sentinel://
    (rediss+ with a Pki) URL, with a port where no sentinel listens first
    when dead_first."""

    def __init__(self, pki=None, name="mymaster", down_ms=1000, failover_ms=3000,
                 sentinel_password=""):
        self.pki, self.name, self.sentinel_password = pki, name, sentinel_password
        self.frozen = set()     # ports of servers the test stopped (SIGSTOP): not asked
        self.dir = tempfile.mkdtemp(prefix="permitd-sentinel-")
        self.procs = []
        self.master = self._server("master")
        self.replica = self._server("replica", "--replicaof", "127.0.0.1", str(self.master))
        self.sentinels = []
        for i in range(3):
            port = free_port()
            conf = os.path.join(self.dir, "sentinel%d.conf" % i)
            with open(conf, "w") as f:
                f.write("bind 127.0.0.1\nprotected-mode no\ndir %s\n" % self.dir)
                f.write(self._tls_conf(port) if pki else "port %d\n" % port)
                f.write("sentinel monitor %s 127.0.0.1 %d 2\n" % (name, self.master))
                f.write("sentinel down-after-milliseconds %s %d\n" % (name, down_ms))
                f.write("sentinel failover-timeout %s %d\n" % (name, failover_ms))
                f.write("sentinel parallel-syncs %s 1\n" % name)
                if sentinel_password:       # the sentinels' own, also between them
                    f.write("requirepass %s\nsentinel sentinel-pass %s\n"
                            % (sentinel_password, sentinel_password))
            self._start("sentinel%d" % i, [conf, "--sentinel"])
            self.sentinels.append(port)
        self._wait(lambda: "master_link_status:up" in self.call(self.replica, "INFO",
                                                                 "replication"),
                   "the replica in sync")
        for port in self.sentinels:
            self._wait(lambda: self._knows_all(port), "sentinel %d sees the replica and the "
                       "other sentinels" % port)

    def _tls_conf(self, port):
        p = self.pki
        return ("port 0\ntls-port %d\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
                "tls-auth-clients no\ntls-replication yes\n"
                % (port, p.server_cert, p.server_key, p.ca))

    def _server(self, what, *extra):
        port = free_port()
        net = ["--port", str(port)]
        if self.pki:
            p = self.pki
            net = ["--port", "0", "--tls-port", str(port), "--tls-cert-file", p.server_cert,
                   "--tls-key-file", p.server_key, "--tls-ca-cert-file", p.ca,
                   "--tls-auth-clients", "no", "--tls-replication", "yes"]
        d = os.path.join(self.dir, what)
        os.mkdir(d)
        self._start(what, net + ["--bind", "127.0.0.1", "--dir", d, "--save", "",
                                 "--appendonly", "no", "--protected-mode", "no"] + list(extra))
        self._wait(lambda: self._pings(port), "%s on port %d" % (what, port))
        return port

    def _start(self, what, args):
        log = open(os.path.join(self.dir, what + ".log"), "w")
        proc = subprocess.Popen(["redis-server"] + args, stdout=log, stderr=subprocess.STDOUT)
        proc.what = what
        self.procs.append(proc)
        return proc

    def proc(self, what):
        return [p for p in self.procs if p.what == what][0]

    def client(self, port):
        if self.pki:
            from .redis_tls import TlsRedis
            c = TlsRedis(port, self.pki.context())
        else:
            c = Redis(port)
        if self.sentinel_password and port in getattr(self, "sentinels", []):
            c("AUTH", self.sentinel_password)
        return c

    def call(self, port, *args):
        """One command on a connection of its own."""
        c = self.client(port)
        try:
            return c(*args)
        finally:
            c.close()

    def _pings(self, port):
        try:
            return self.call(port, "PING") == "PONG"
        except (OSError, Exception):
            return False

    def _knows_all(self, port):
        m = self.call(port, "SENTINEL", "MASTER", self.name)
        info = dict(zip(m[0::2], m[1::2]))
        return int(info["num-slaves"]) >= 1 and int(info["num-other-sentinels"]) >= 2

    @staticmethod
    def _wait(cond, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if cond():
                    return
            except (OSError, Exception):
                pass
            time.sleep(0.1)
        raise AssertionError("not within %d s: %s" % (timeout, what))

    def url(self, user="", password="", dead_first=False):
        ports = ([free_port()] if dead_first else []) + self.sentinels
        auth = ("%s:%s@" % (user, password)) if password else ""
        return "redis%s+sentinel://%s%s/%s" % ("s" if self.pki else "", auth,
                                               ",".join("127.0.0.1:%d" % p for p in ports),
                                               self.name)

    def current_master(self):
        """The master's port as a sentinel that answers names it."""
        for port in self.sentinels:
            if port in self.frozen:
                continue
            try:
                host, p = self.call(port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
                return int(p)
            except (OSError, Exception):
                continue
        return None

    def freeze(self, what, port):
        """SIGSTOP of a server: it answers nothing and closes nothing."""
        os.kill(self.proc(what).pid, signal.SIGSTOP)
        self.frozen.add(port)

    def thaw_all(self):
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
        self.frozen.clear()

    def kill_master(self):
        """kill -9 of the master's process."""
        os.kill(self.proc("master").pid, signal.SIGKILL)
        self.proc("master").wait()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
