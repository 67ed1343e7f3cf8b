"""The shipped alert rules in a real Prometheus (issue 39): Debian's
prometheus, started in the test's temp dir on a free port with the
prometheus.yml docs/operations.md ("Alerts and dashboards") shows, scrapes
TWO permitd instances sharing a Redis, with deploy/prometheus/permitd.rules.yml
loaded. Traffic is driven through both so that one policy denies almost
everything and another nothing:
  - PermitdPolicyDenying is seen firing through /api/v1/alerts for the
    denying policy only, its annotations naming it, and no other alert fires;
  - every rule evaluates without error (/api/v1/rules), and every query of
    deploy/grafana/permitd.json runs, the denial share and the instances'
    panels with the figures the traffic made;
  - one instance stopped: PermitdInstanceMissing fires for it; Redis
    stopped: PermitdRedisUnavailable fires for the other, and
    PermitdFailureModeOpenPasses for the failure_mode open policy it lets
    through.
The copy of the rules the test loads has every `for:` shortened to 10
seconds (the expressions unchanged: their durations are promtool's unit
tests', deploy/prometheus/permitd.rules.test.yml), and the doc's 15 s
scrape and evaluation intervals become 2 s and 1 s, so the test does not
wait five minutes. Deadlines are generous; nothing is timed."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

import harness
from harness import (Permitd, PrivateRedis, SOURCE_DIR, decision, free_port, put_policy, unique,
                     wait_for)

RULES = os.path.join(SOURCE_DIR, "deploy", "prometheus", "permitd.rules.yml")
DASHBOARD = os.path.join(SOURCE_DIR, "deploy", "grafana", "permitd.json")
OPERATIONS = os.path.join(SOURCE_DIR, "docs", "operations.md")
FOR = "10s"


def doc_config():
    """The prometheus.yml block of docs/operations.md's "Alerts and dashboards"."""
    with open(OPERATIONS) as f:
        text = f.read()
    m = re.search(r"<!-- run by: tests/integration/test_alerts\.py -->\n```yaml\n(.*?)```",
                  text, re.S)
    assert m, "docs/operations.md has no prometheus.yml block run by this test"
    return m.group(1)


class Prometheus:
    """A prometheus server of the test's own, in a temp dir, on a free port."""

    def __init__(self, config, rules):
        self.dir = tempfile.mkdtemp(prefix="permitd-prometheus-")
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            f.write(config)
        with open(os.path.join(self.dir, "permitd.rules.yml"), "w") as f:
            f.write(rules)
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w+")
        binary = shutil.which("prometheus") or "/usr/bin/prometheus"
        for attempt in range(3):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [binary, "--config.file=" + os.path.join(self.dir, "prometheus.yml"),
                 "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                 "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=info"],
                stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.dir)
            try:
                wait_for("prometheus ready", self.ready, timeout=120)
                return
            except (AssertionError, RuntimeError):
                self.stop()
                if attempt == 2 or "address already in use" not in self.output():
                    raise AssertionError("prometheus did not start:\n" + self.output())

    def ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError("prometheus exited:\n" + self.output())
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port,
                                        timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path, **params):
        url = "http://127.0.0.1:%d/api/v1/%s" % (self.port, path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, state="firing"):
        return [a for a in self.api("alerts")["alerts"] if a["state"] == state]

    def output(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class AlertsTest(unittest.TestCase):

    def setUp(self):
        self.redis = PrivateRedis()
        self.addCleanup(self.redis.stop)
        r = self.redis.client()
        self.prefix = unique("al") + ":"
        self.denying = unique("deny")
        self.fine = unique("fine")
        self.opened = unique("open")
        put_policy(r, self.denying, max_permits=2, rate=0.001, prefix=self.prefix)
        put_policy(r, self.fine, max_permits=1000000, rate=100000, prefix=self.prefix)
        put_policy(r, self.opened, max_permits=1000000, rate=100000, prefix=self.prefix,
                   failure_mode="open")
        r.close()
        self.permitds = []
        for _ in range(2):
            p = Permitd(redis_url=self.redis.url, prefix=self.prefix)
            self.addCleanup(p.stop)
            self.permitds.append(p)
        self.stop_traffic = threading.Event()
        self.addCleanup(self.stop_traffic.set)
        self.config, self.rules = self.configs()
        self.prom = Prometheus(self.config, self.rules)
        self.addCleanup(self.prom.stop)

    def configs(self):
        """The doc's prometheus.yml, aimed at the two instances at 1 s, and
        the shipped rules with `for:` shortened (and nothing else changed)."""
        targets = ", ".join('"127.0.0.1:%d"' % p.admin_port for p in self.permitds)
        config, n = re.subn(r'targets: \[[^\]]*\]', "targets: [%s]" % targets, doc_config())
        self.assertEqual(n, 1, config)
        # Every 2 s (a scrape's timeout is its interval: 2 s for an ASan
        # build on a busy box), the rules evaluated every second.
        config, n = re.subn(r"scrape_interval: 15s", "scrape_interval: 2s", config)
        self.assertEqual(n, 1, config)
        config, n = re.subn(r"evaluation_interval: 15s", "evaluation_interval: 1s", config)
        self.assertEqual(n, 1, config)
        self.assertIn("- permitd.rules.yml", config)
        with open(RULES) as f:
            shipped = f.read()
        rules, n = re.subn(r"^(\s+for: )\d+[smh]$", r"\g<1>" + FOR, shipped, flags=re.M)
        self.assertGreaterEqual(n, 5)
        strip = lambda t: re.sub(r"^\s+for: .*\n", "", t, flags=re.M)   # noqa: E731
        self.assertEqual(strip(rules), strip(shipped))
        return config, rules

    def drive(self, p, name, stop):
        """Acquires of name through p, about 20 a second, until stop."""
        c = p.http()
        try:
            while not stop.is_set():
                c.acquire(name)
                stop.wait(0.05)
        except OSError:
            pass            # the instance was stopped under it
        finally:
            c.close()

    def firing(self, name, **labels):
        return [a for a in self.prom.alerts() if a["labels"]["alertname"] == name and
                all(a["labels"].get(k) == v for k, v in labels.items())]

    def query(self, expr):
        return self.prom.api("query", query=expr)["result"]

    def test_a_policy_denying_fires_and_only_it(self):
        for p in self.permitds:
            for name in (self.denying, self.fine):
                t = threading.Thread(target=self.drive, args=(p, name, self.stop_traffic),
                                     daemon=True)
                t.start()
        wait_for("both instances scraped",
                 lambda: sorted(t["health"] for t in self.prom.api("targets")["activeTargets"])
                 == ["up", "up"], timeout=120)
        alert = wait_for("PermitdPolicyDenying firing for %s" % self.denying,
                         lambda: self.firing("PermitdPolicyDenying", policy=self.denying),
                         timeout=300)[0]
        self.assertEqual(alert["labels"]["severity"], "warning")
        self.assertEqual(alert["labels"]["job"], "permitd")
        self.assertIn("permitd policy %s denies " % self.denying, alert["annotations"]["summary"])
        self.assertIn("policy %s denied" % self.denying, alert["annotations"]["description"])
        self.assertEqual(alert["annotations"]["runbook_url"],
                         "docs/operations.md#permitdpolicydenying")
        # The share is the fleet's: both instances' denials are in it.
        self.assertGreater(float(alert["value"]), 0.9, alert)
        firing = [(a["labels"]["alertname"], a["labels"].get("policy")) for a in self.prom.alerts()]
        self.assertEqual(firing, [("PermitdPolicyDenying", self.denying)],
                         "the fine policy and the healthy instances alert nothing")
        # Every rule evaluates (a rule on a metric permitd lacks would too,
        # silently: those are unit_alert_files' check).
        groups = self.prom.api("rules")["groups"]
        loaded = [r for g in groups for r in g["rules"]]
        self.assertEqual(len(loaded), 8, loaded)
        for r in loaded:
            self.assertEqual(r["health"], "ok", r)
        self.check_dashboard()

    def check_dashboard(self):
        """Every query of the dashboard runs; the share and the instances
        show what the traffic made."""
        with open(DASHBOARD) as f:
            dash = json.load(f)
        ran = 0
        for panel in dash["panels"]:
            for t in panel.get("targets", []):
                expr = (t["expr"].replace("$__rate_interval", "1m").replace("$job", "permitd")
                        .replace("$policy", ".*"))
                self.query(expr)            # raises unless Prometheus says success
                ran += 1
        self.assertGreater(ran, 20)
        share = {s["metric"]["policy"]: float(s["value"][1]) for s in self.query(
            'sum by (policy) (rate(permitd_acquires_total{job=~"permitd",policy=~".*",'
            'result="denied"}[1m])) / sum by (policy) (rate(permitd_acquires_total{job=~"permitd",'
            'policy=~".*",result=~"allowed|denied"}[1m]))')}
        self.assertGreater(share[self.denying], 0.9, share)
        self.assertEqual(share[self.fine], 0, share)
        up = self.query('sum(up{job=~"permitd"})')
        self.assertEqual(float(up[0]["value"][1]), 2)
        redis_up = {s["metric"]["instance"]: float(s["value"][1])
                    for s in self.query('permitd_redis_up{job=~"permitd"}')}
        self.assertEqual(redis_up, {"127.0.0.1:%d" % p.admin_port: 1 for p in self.permitds})

    def test_an_instance_stopped_redis_stopped_and_open_passes_fire(self):
        gone, left = self.permitds
        c = left.http()
        self.assertTrue(decision(c.acquire(self.opened))["allowed"])     # held, and counted
        c.close()
        wait_for("both instances scraped",
                 lambda: sorted(t["health"] for t in self.prom.api("targets")["activeTargets"])
                 == ["up", "up"], timeout=120)
        self.assertEqual(self.firing("PermitdInstanceMissing"), [])
        gone.stop()
        alert = wait_for("PermitdInstanceMissing firing",
                         lambda: self.firing("PermitdInstanceMissing"), timeout=300)
        self.assertEqual([a["labels"]["instance"] for a in alert],
                         ["127.0.0.1:%d" % gone.admin_port])
        self.assertIn("permitd instance 127.0.0.1:%d is missing" % gone.admin_port,
                      alert[0]["annotations"]["summary"])
        self.assertEqual(self.firing("PermitdRedisUnavailable"), [])
        self.redis.stop()
        alert = wait_for("PermitdRedisUnavailable firing",
                         lambda: self.firing("PermitdRedisUnavailable"), timeout=300)
        self.assertEqual([a["labels"]["instance"] for a in alert],
                         ["127.0.0.1:%d" % left.admin_port])
        self.assertIn("cannot reach Redis", alert[0]["annotations"]["summary"])
        self.assertEqual(self.firing("PermitdFailureModeOpenPasses"), [])
        c = left.http()         # a new connection: the first one idled out meanwhile
        self.addCleanup(c.close)
        for _ in range(5):
            d = decision(c.acquire(self.opened))
            self.assertTrue(d["allowed"], d)
        alert = wait_for("PermitdFailureModeOpenPasses firing",
                         lambda: self.firing("PermitdFailureModeOpenPasses"), timeout=300)
        self.assertEqual([(a["labels"]["instance"], a["labels"]["policy"]) for a in alert],
                         [("127.0.0.1:%d" % left.admin_port, self.opened)])
        self.assertIn("lets policy %s through without a limit" % self.opened,
                      alert[0]["annotations"]["summary"])
        self.redis.start()


if __name__ == "__main__":
    harness.main()
