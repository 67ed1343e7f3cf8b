"""The build's own rules, read from the configured targets (tests/unit/
CMakeLists.txt hands their properties in as arguments).

- The generated protobuf-c code is compiled with the project's warning
  flags (PERMITD_CFLAGS), as the top CMakeLists.txt says: every flag of the
  list is among permitd_proto's and permitd_test_proto's compile options,
  save a -Wno-... a target names for what its code cannot satisfy.
- permitd_core links its libraries PRIVATE: none of their include
  directories (hiredis's, MariaDB's, ...) reaches the permitd binary's
  compile line, which links only the core; only the wrappers inside the
  core see those headers.
"""
import argparse
import sys
import unittest

ARGS = None


def flags(s):
    return [f for f in s.split("|") if f]


class BuildTest(unittest.TestCase):

    def check_warnings(self, target, options):
        want = flags(ARGS.cflags)
        self.assertIn("-Werror", want, "PERMITD_CFLAGS reached the test")
        got = flags(options)
        exempt = {f for f in got if f.startswith("-Wno-")}
        missing = [f for f in want if f not in got and "-Wno-" + f[2:] not in exempt]
        self.assertEqual(missing, [], "%s is built with PERMITD_CFLAGS (has: %s)" % (target, got))

    def test_build_proto_gets_the_warning_flags(self):
        self.check_warnings("permitd_proto", ARGS.proto)

    def test_build_test_proto_gets_the_warning_flags(self):
        self.check_warnings("permitd_test_proto", ARGS.test_proto)

    def test_build_core_links_its_libraries_private(self):
        wrapped = set(f.rstrip("/") for f in flags(ARGS.wrapped_includes))
        self.assertIn("/usr/include/hiredis", wrapped, "the libraries' directories reached the test")
        got = set(f.rstrip("/") for f in flags(ARGS.permitd_includes))
        self.assertTrue(any(d.endswith("/server") for d in got), "permitd's directories: %s" % got)
        self.assertEqual(sorted(wrapped & got), [],
                         "the permitd binary sees no wrapped library's headers")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--cflags", required=True)
    p.add_argument("--proto", default="")
    p.add_argument("--test-proto", default="")
    p.add_argument("--wrapped-includes", default="")
    p.add_argument("--permitd-includes", default="")
    ARGS, rest = p.parse_known_args()
    sys.exit(0 if unittest.main(argv=sys.argv[:1] + rest, exit=False,
                                verbosity=2).result.wasSuccessful() else 1)
