"""The alert rules and the Grafana dashboard permitd ships (issue 39), checked
without servers:
  - deploy/prometheus/permitd.rules.yml passes `promtool check rules`, and its
    unit tests (deploy/prometheus/permitd.rules.test.yml) pass `promtool
    test rules` (Debian's prometheus package, scripts/install-deps.sh test);
  - every alert the issue asks for is there, each with a summary and a
    description naming the policy, instance or job, and a runbook_url
    pointing at a heading of docs/operations.md;
  - every alert has a unit test where it fires and one where it does not;
  - deploy/grafana/permitd.json parses, and every metric an expression of
    the dashboard or of the rules reads is one docs/operations.md's
    "Metrics" lists (the families test_metrics.py holds /metrics to), or
    Prometheus's own `up`.
tests/integration/test_alerts.py loads the same files into a real
Prometheus scraping two permitd instances."""
import json
import os
import re
import shutil
import subprocess
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = os.path.join(ROOT, "deploy", "prometheus", "permitd.rules.yml")
RULE_TESTS = os.path.join(ROOT, "deploy", "prometheus", "permitd.rules.test.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "permitd.json")
OPERATIONS = os.path.join(ROOT, "docs", "operations.md")

# What issue 39 (and the reservations pool's metrics after it) ask to be
# warned of, and the alert that does.
REQUIRED = {
    "a policy denying more than a set share for 5 minutes": "PermitdPolicyDenying",
    "failure-mode passes": "PermitdFailureModeOpenPasses",
    "Redis unavailable": "PermitdRedisUnavailable",
    "sync stale": "PermitdSyncStale",
    "settle stuck": "PermitdSettleStuck",
    "instance missing": "PermitdInstanceMissing",
    "a full reservations pool refusing calls": "PermitdReservePoolRefusing",
}
# PromQL words that are not metric names.
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan"}


def promtool(*args):
    tool = shutil.which("promtool")
    if tool is None:
        raise AssertionError("promtool not found: scripts/install-deps.sh test installs it "
                             "(Debian package prometheus)")
    p = subprocess.run([tool] + list(args), capture_output=True, timeout=120,
                       cwd=os.path.dirname(RULES))
    return p.returncode, (p.stdout + p.stderr).decode()


def documented_families():
    """The families docs/operations.md's "### Metrics" names (as test_metrics.py reads them)."""
    with open(OPERATIONS) as f:
        text = f.read()
    section = text[text.index("\n### Metrics\n"):]
    section = section[:section.index("\n### ", 1)]
    return set(re.findall(r"\bpermitd_[a-z_]+[a-z]", section))


def anchors():
    """The GitHub anchors of docs/operations.md's headings."""
    with open(OPERATIONS) as f:
        heads = re.findall(r"^#+ (.+)$", f.read(), re.M)
    return {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def rules():
    """The alert rules of RULES: [{alert, expr, for, labels, annotations}], read
    from the layout the file keeps (two-space YAML, block scalars for long
    text), so no YAML library is needed; promtool checks the YAML itself."""
    out, cur, block, block_indent, section = [], None, None, 0, None
    with open(RULES) as f:
        lines = f.read().splitlines()
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if block is not None:
            if line.strip() == "" or indent > block_indent:
                block[1].append(line.strip())
                continue
            target, parts = block
            target[0][target[1]] = " ".join(p for p in parts if p).strip()
            block = None
        stripped = line.strip()
        if stripped.startswith("#") or not stripped:
            continue
        m = re.match(r"^- (alert|record): (\S+)$", stripped)
        if m:
            cur = {"alert": m.group(2) if m.group(1) == "alert" else None,
                   "labels": {}, "annotations": {}}
            out.append(cur)
            section = None
            continue
        if cur is None:
            continue
        m = re.match(r"^(expr|for|labels|annotations|[a-z_]+): ?(.*)$", stripped)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if key in ("labels", "annotations") and value == "":
            section, section_indent = cur[key], indent
            continue
        if section is not None and indent > section_indent:
            where = (section, key)
        else:
            section = None
            where = (cur, key)
        if value in ("|", ">-", ">", "|-"):
            block, block_indent = (where, []), indent
        else:
            where[0][where[1]] = value.strip('"')
    if block is not None:
        block[0][0][block[0][1]] = " ".join(p for p in block[1] if p).strip()
    return [r for r in out if r["alert"]]


def metric_names(expr):
    """The metric names a PromQL expression reads."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # strings
    e = re.sub(r"\{[^}]*\}", "", e)                        # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                       # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word, after = m.group(0), e[m.end():].lstrip()
        if after.startswith("(") or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def family(name, documented):
    """A histogram's series (_bucket, _sum, _count) belong to its family."""
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return base if base != name and base in documented else name


class RuleFilesTest(unittest.TestCase):

    def test_promtool_check_rules(self):
        rc, said = promtool("check", "rules", RULES)
        self.assertEqual(rc, 0, said)
        self.assertIn("SUCCESS", said)

    def test_promtool_test_rules(self):
        rc, said = promtool("test", "rules", RULE_TESTS)
        self.assertEqual(rc, 0, said)
        self.assertIn("SUCCESS", said)

    def test_every_alert_asked_for_is_there_named_and_with_a_runbook(self):
        got = {r["alert"]: r for r in rules()}
        for what, name in REQUIRED.items():
            self.assertIn(name, got, what)
        heads = anchors()
        for name, r in got.items():
            a = r["annotations"]
            self.assertTrue(a.get("summary") and a.get("description"), (name, a))
            named = a["summary"] + a["description"]
            self.assertRegex(named, r"\$labels\.(policy|instance|job)", name)
            self.assertRegex(a.get("runbook_url", ""), r"^docs/operations\.md#", name)
            self.assertIn(a["runbook_url"].split("#", 1)[1], heads,
                          "%s's runbook_url names no heading of docs/operations.md" % name)
            self.assertIn(r["labels"].get("severity"), ("warning", "critical"), name)
        self.assertEqual(got["PermitdPolicyDenying"].get("for"), "5m")

    def test_every_alert_is_tested_firing_and_not_firing(self):
        with open(RULE_TESTS) as f:
            text = f.read()
        cases = re.findall(r"alertname: (\S+)\n\s+exp_alerts:( \[\])?", text)
        for r in rules():
            fires = [c for c in cases if c[0] == r["alert"] and not c[1]]
            quiet = [c for c in cases if c[0] == r["alert"] and c[1]]
            self.assertTrue(fires, "%s is never tested firing" % r["alert"])
            self.assertTrue(quiet, "%s is never tested not firing" % r["alert"])

    def test_rule_expressions_read_documented_metrics(self):
        documented = documented_families()
        self.assertGreater(len(documented), 40)
        for r in rules():
            names = {family(n, documented) for n in metric_names(r["expr"])}
            self.assertTrue(names, r)
            self.assertEqual(sorted(names - documented - {"up"}), [],
                             "%s reads metrics docs/operations.md does not list" % r["alert"])

    def test_dashboard_parses_and_reads_documented_metrics(self):
        with open(DASHBOARD) as f:
            dash = json.load(f)
        self.assertEqual(dash["uid"], "permitd-overview")
        documented = documented_families()
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        self.assertGreater(len(exprs), 20)
        read = set()
        for e in exprs:
            names = {family(n, documented) for n in metric_names(e)}
            self.assertTrue(names, e)
            self.assertEqual(sorted(names - documented - {"up"}), [],
                             "the dashboard reads metrics docs/operations.md does not list: %s" % e)
            read |= names
        # What the issue asks the dashboard to show.
        for name in ("permitd_acquires_total", "permitd_failure_mode_open_passes_by_policy_total",
                     "permitd_redis_up", "permitd_sync_last_success_timestamp_seconds",
                     "permitd_settle_pending", "up"):
            self.assertIn(name, read)
        for v in dash["templating"]["list"]:
            if v["type"] == "query":    # label_values(<series>, <label>)
                series = re.match(r"^label_values\((.*),\s*\w+\)$", v["definition"]).group(1)
                self.assertEqual(sorted(metric_names(series) - documented), [], v)
        ids = [p["id"] for p in dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "a panel id twice")

    def test_the_metric_reader_finds_names(self):
        # metric_names() itself: a check that found no name would pass anything.
        self.assertEqual(metric_names('sum by (policy) (rate(a_total{job=~"$job",x="y z"}[5m])) '
                                      '/ on (job) b > 0.5 and time() - c_seconds > 300'),
                         {"a_total", "b", "c_seconds"})
        self.assertEqual(metric_names('absent(up{job="permitd"})'), {"up"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
