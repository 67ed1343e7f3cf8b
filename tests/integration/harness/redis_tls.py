"""Redis over TLS for the tests (README "Redis over TLS"): certificates made
here with openssl, redis-servers of a test's own listening on TLS only
(--port 0 --tls-port P, so any connection permitd makes in plaintext is
refused), a Redis Cluster of three TLS masters (tls-cluster yes), and the
harness's RESP client over Python's ssl module."""
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time

from .redis import Redis
from .stack import free_port


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=cwd)


def _ca(d, name):
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=%s" % name, "-keyout", name + ".key", "-out", name + ".crt", cwd=d)


def _leaf(d, name, ca, san, client=False):
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % name,
             "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("extendedKeyUsage=%s\n" % ("clientAuth" if client else "serverAuth,clientAuth"))
        if san:
            f.write("subjectAltName=%s\n" % san)
    _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
             "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", name + ".crt", cwd=d)


class Pki:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client
    certificate, a server certificate for another name (same CA) and a
    second CA that signed nothing permitd is shown. Paths as attributes:
    ca, server_cert/server_key, client_cert/client_key, wrong_name_cert/
    wrong_name_key, other_ca."""

    def __init__(self):
        self.dir = d = tempfile.mkdtemp(prefix="permitd-pki-")
        _ca(d, "ca")
        _ca(d, "other-ca")
        _leaf(d, "server", "ca", "IP:127.0.0.1,DNS:localhost")
        _leaf(d, "wrong-name", "ca", "DNS:wrong.example")
        _leaf(d, "client", "ca", None, client=True)
        p = lambda n: os.path.join(d, n)
        self.ca, self.other_ca = p("ca.crt"), p("other-ca.crt")
        self.server_cert, self.server_key = p("server.crt"), p("server.key")
        self.wrong_name_cert, self.wrong_name_key = p("wrong-name.crt"), p("wrong-name.key")
        self.client_cert, self.client_key = p("client.crt"), p("client.key")

    def context(self, check_hostname=True):
        """A client context that trusts the CA and shows the client
        certificate (enough for a Redis that asks for one)."""
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.check_hostname = check_hostname
        ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class TlsRedis(Redis):
    """The harness's RESP client over TLS."""

    def __init__(self, port, ctx, host="127.0.0.1"):
        self.port = port
        raw = socket.create_connection((host, port), timeout=10)
        self.sock = ctx.wrap_socket(raw, server_hostname=host)
        self.buf = b""


def _tls_args(pki, cert, key, auth_clients):
    return ["--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", pki.ca,
            "--tls-auth-clients", "yes" if auth_clients else "no"]


class TlsRedisServer:
    """One redis-server on TLS only: cert/key default to the PKI's server
    pair; auth_clients asks every client for a certificate the CA signed.
    url is its rediss:// URL."""

    def __init__(self, pki, cert=None, key=None, auth_clients=False, extra=()):
        self.pki = pki
        self.dir = tempfile.mkdtemp(prefix="permitd-redis-tls-")
        self.port = free_port()
        self.bus_port = free_port()     # CLUSTER MEET's third argument
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.dir, "--save", "", "--appendonly", "no", "--protected-mode", "no"]
            + _tls_args(pki, cert or pki.server_cert, key or pki.server_key, auth_clients)
            + (["--cluster-port", str(self.bus_port)] if "--cluster-enabled" in extra else [])
            + list(extra),
            stdout=open(os.path.join(self.dir, "redis.log"), "w"), stderr=subprocess.STDOUT)
        self.check_hostname = cert is None        # the wrong-name pair: CA checked only
        _wait_tls(self.port, pki, self.proc, self.check_hostname)
        self.url = "rediss://127.0.0.1:%d" % self.port

    def client(self):
        return TlsRedis(self.port, self.pki.context(self.check_hostname))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _wait_tls(port, pki, proc, check_hostname, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("redis-server (TLS, port %d) exited with %s" % (port, proc.returncode))
        try:
            c = TlsRedis(port, pki.context(check_hostname))
            try:
                if c("PING") == "PONG":
                    return
            finally:
                c.close()
        except (OSError, ssl.SSLError):
            pass
        time.sleep(0.05)
    raise RuntimeError("redis-server (TLS, port %d) did not answer" % port)


class TlsCluster:
    """Three Redis Cluster masters, TLS only (tls-cluster yes: the cluster
    bus and the announced ports are TLS too), slots spread by redis-cli
    --cluster create over TLS. seeds: "127.0.0.1:P" of the first master."""

    def __init__(self, pki, n=3, auth_clients=False, extra=()):
        self.pki = pki
        self.servers = []
        for _ in range(n):
            s = TlsRedisServer(pki, auth_clients=auth_clients, extra=[
                "--cluster-enabled", "yes", "--cluster-node-timeout", "2000",
                "--tls-cluster", "yes", "--tls-replication", "yes"] + list(extra))
            self.servers.append(s)
        cli = ["redis-cli", "--tls", "--cacert", pki.ca, "--cert", pki.client_cert,
               "--key", pki.client_key, "--cluster", "create"] + \
              ["127.0.0.1:%d" % s.port for s in self.servers] + \
              ["--cluster-replicas", "0", "--cluster-yes"]
        subprocess.run(cli, check=True, capture_output=True, timeout=60)
        deadline = time.time() + 30
        while True:
            infos = []
            for s in self.servers:
                c = s.client()
                try:
                    infos.append(c("CLUSTER", "INFO"))
                finally:
                    c.close()
            info = "\n".join(infos)
            if all("cluster_state:ok" in i for i in infos):
                break
            if time.time() > deadline:
                raise RuntimeError("TLS cluster not ok:\n" + info)
            time.sleep(0.1)
        self.seeds = "127.0.0.1:%d" % self.servers[0].port

    def clients(self):
        return [s.client() for s in self.servers]

    def stop(self):
        for s in self.servers:
            s.stop()
