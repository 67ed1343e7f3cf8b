"""HTTP for the tests: a keep-alive client with Connect helpers, chunked
POSTs (through http.client, and over a raw socket that reads the answer
while the body is still going out), parsing a raw response, reading a
decision or an error code out of a reply, and `hammer`, many client threads
on one bucket."""
import gzip
import http.client
import json
import re
import socket
import time


class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "Reply(%d, %r, %r)" % (self.status, self.headers, self.body[:300])


class Http:
    """A keep-alive connection to one permitd."""

    def __init__(self, port):
        self.port = port
        self.conn = self._connect()

    def _connect(self):
        """The connection this client sends on (a subclass may choose, say,
        its local address); http.client opens it again, before sending
        anything, once the server or request() has closed it."""
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(self, method, path, body=None, headers=None):
        """Sends one request and returns its Reply. A request is sent once,
        never again on its own: when the connection fails at any point (the
        server closed it while it was idle, or after an error reply without
        saying so, or before answering), this raises ConnectionError naming
        the request and the cause, and drops the connection. A re-send would
        hide a request the server acted on but did not answer (a double take
        reported as one success). The next request on this Http, which the
        test chose to send, goes out on a new connection; so does one after
        a reply that said Connection: close (http.client reconnects before
        sending anything)."""
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
            r = self.conn.getresponse()
            return Reply(r.status, r.getheaders(), r.read())
        except (http.client.HTTPException, OSError) as e:
            self.conn.close()
            raise ConnectionError(
                "%s %s on 127.0.0.1:%d failed: %s: %s (harness.Http does not send a "
                "request again; a test that expects the server to close the connection "
                "opens a new one)" % (method, path, self.port, type(e).__name__, e)) from e

    def rpc_json(self, method, msg, headers=None, service="permit.v1.RateLimitService"):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return self.request("POST", "/%s/%s" % (service, method), json.dumps(msg).encode(), h)

    def rpc_proto(self, method, body, headers=None, service="permit.v1.RateLimitService"):
        h = {"Content-Type": "application/proto"}
        h.update(headers or {})
        return self.request("POST", "/%s/%s" % (service, method), body, h)

    def acquire(self, bucket, app="app", key="", permits=None, headers=None):
        msg = {"bucket": bucket, "app": app}
        if key:
            msg["key"] = key
        if permits is not None:
            msg["permits"] = permits
        return self.rpc_json("Acquire", msg, headers)

    def peek(self, bucket, app="app", key=""):
        msg = {"bucket": bucket, "app": app}
        if key:
            msg["key"] = key
        return self.rpc_json("Peek", msg)

    def close(self):
        self.conn.close()


def gz(data):
    return gzip.compress(data)


def content_type(reply):
    """The media type of a reply, without parameters, lower case."""
    return reply.headers.get("content-type", "").split(";")[0].strip().lower()


def chunked_post(port, path, chunks, headers=None, timeout=30):
    """POSTs `chunks` (bytes pieces) with Transfer-Encoding: chunked and no
    Content-Length, through http.client, on a connection of its own."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=(c for c in chunks), headers=headers or {},
                     encode_chunked=True)
        r = conn.getresponse()
        return Reply(r.status, r.getheaders(), r.read())
    finally:
        conn.close()


class _BytesSock:
    def __init__(self, data):
        self.data = data

    def makefile(self, *args, **kwargs):
        import io
        return io.BytesIO(self.data)


def parse_http_response(data):
    """A Reply from the raw bytes of one complete HTTP/1.1 response, or None
    while `data` does not hold a complete one."""
    if b"\r\n\r\n" not in data:
        return None
    r = http.client.HTTPResponse(_BytesSock(data))
    try:
        r.begin()
        body = r.read()
    except (http.client.HTTPException, ValueError):
        return None
    return Reply(r.status, r.getheaders(), body)


def raw_chunked_post(port, path, chunks, headers=None, timeout=60):
    """Sends a chunked POST over a raw socket, reading whatever the server
    answers while the body is still going out (a server may reply and close
    early). Returns (reply, error): reply is a Reply if a complete response
    arrived, else None; error is the OSError that cut sending or reading
    short, else None."""
    import select
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    head = "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: chunked\r\n" % (path, port)
    for k, v in (headers or {}).items():
        head += "%s: %s\r\n" % (k, v)
    received, error = b"", None
    try:
        sock.sendall((head + "\r\n").encode())
        for chunk in chunks:
            while select.select([sock], [], [], 0)[0]:
                data = sock.recv(65536)
                if not data:
                    break
                received += data
            if parse_http_response(received) is not None:
                break
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        else:
            sock.sendall(b"0\r\n\r\n")
    except OSError as e:
        error = e
    try:
        deadline = time.time() + timeout
        while parse_http_response(received) is None and time.time() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            received += data
    except OSError as e:
        error = error or e
    finally:
        sock.close()
    return parse_http_response(received), error


def decision(reply):
    """A 200 Acquire/Peek JSON reply as a dict with snake_case keys and the
    proto3 defaults filled in (JSON leaves out fields at their default and
    writes int64 as strings): allowed (bool), remaining, limit,
    retry_after_ms, reset_after_ms (ints). AssertionError on anything else."""
    if reply.status != 200:
        raise AssertionError("expected a 200 decision, got %r" % (reply,))
    m = reply.json()

    def num(camel, snake):
        v = m.get(camel, m.get(snake))
        return 0 if v is None else int(v)

    return {"allowed": bool(m.get("allowed", False)),
            "remaining": num("remaining", "remaining"),
            "limit": num("limit", "limit"),
            "retry_after_ms": num("retryAfterMs", "retry_after_ms"),
            "reset_after_ms": num("resetAfterMs", "reset_after_ms")}


def error_code(reply):
    """The Connect error code of a reply ("" for a 200 or a body that is not one)."""
    if reply.status == 200:
        return ""
    try:
        return reply.json().get("code", "")
    except ValueError:
        return ""


def hammer(ports, bucket, threads=8, seconds=3.0, app="app", key="", permits=None):
    """Sequential Acquires on one bucket from `threads` client threads, spread
    round-robin over the permitd `ports`, each thread on its own keep-alive
    connection, for `seconds`. Returns a dict:
      allowed      number of allowed decisions
      denied       number of denials
      errors       replies that were not 200 (up to 20 of them)
      allowed_at   time.time() of each allowed reply, sorted
      per_port     {port: allowed}
      first_send, last_reply, elapsed (last_reply - first_send)"""
    import threading

    start = threading.Barrier(threads)
    lock = threading.Lock()
    out = {"allowed": 0, "denied": 0, "errors": [], "allowed_at": [],
           "per_port": {p: 0 for p in ports}, "first_send": None, "last_reply": None}

    def run(port):
        conn = Http(port)
        allowed, denied, errors, at = 0, 0, [], []
        start.wait()
        first = time.time()
        stop_at = first + seconds
        last = first
        while time.time() < stop_at:
            r = conn.acquire(bucket, app=app, key=key, permits=permits)
            last = time.time()
            if r.status != 200:
                errors.append(r)
                continue
            if decision(r)["allowed"]:
                allowed += 1
                at.append(last)
            else:
                denied += 1
        conn.close()
        with lock:
            out["allowed"] += allowed
            out["denied"] += denied
            out["errors"] += errors[:20]
            out["allowed_at"] += at
            out["per_port"][port] += allowed
            if out["first_send"] is None or first < out["first_send"]:
                out["first_send"] = first
            if out["last_reply"] is None or last > out["last_reply"]:
                out["last_reply"] = last

    ts = [threading.Thread(target=run, args=(ports[i % len(ports)],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out["allowed_at"].sort()
    out["elapsed"] = out["last_reply"] - out["first_send"]
    return out


def one_response(testcase, data, json_error=True):
    """Asserts data (what a raw socket read, "<<open>>" appended when the
    server left the connection open) is exactly one HTTP/1.1 response (one status line, a
    Content-Length that matches its body), then the end of the connection;
    with json_error, that its body is a Connect error. Returns (status,
    headers, body: the error as a dict with json_error)."""
    testcase.assertNotIn(b"<<open>>", data, "the connection was left open: %r" % data[:400])
    head, sep, rest = data.partition(b"\r\n\r\n")
    testcase.assertTrue(sep, "no end of head in %r" % data[:400])
    lines = head.split(b"\r\n")
    m = re.match(rb"HTTP/1\.1 (\d{3}) [^\r\n]*$", lines[0])
    testcase.assertTrue(m, "bad status line %r" % lines[0])
    headers = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        testcase.assertTrue(colon and name and name.strip() == name, "bad header line %r" % line)
        key = name.decode().lower()
        testcase.assertNotIn(key, headers, "header %s twice in %r" % (key, head))
        headers[key] = value.strip().decode()
    n = int(headers["content-length"])
    testcase.assertEqual(len(rest), n, "more (or less) than one response: %r" % data[:600])
    if not json_error:
        return int(m.group(1)), headers, rest
    testcase.assertEqual(headers.get("content-type", "").split(";")[0], "application/json", data)
    err = json.loads(rest)
    testcase.assertEqual(sorted(err), ["code", "message"], err)
    testcase.assertTrue(err["message"], err)
    return int(m.group(1)), headers, err
