"""cmake/lua_splice.cmake, the one step that puts the Redis scripts together:
lua/<script>.lua's `-- @include NAME` lines replaced by lua/lib/NAME, for
the build (cmake/embed.cmake embeds the spliced text and its SHA-1) and for
every test and bench that loads a script from disk (harness.lua_script(),
tests/bench/redis-cost.sh). Checked here, no server needed:

- a directive is replaced in place (first line, middle, last line without
  a newline), the rest byte for byte; a script without one is unchanged;
- a missing piece, a malformed directive, a nested include stop with an
  error naming the script, the line and the file;
- every script of lua/ splices with no directive left, each piece it names
  in it;
- the binary's scripts (the build's lua_script_files.c, --embedded) are the
  spliced text, and the SHA-1 beside each is that text's: the name
  permitd's EVALSHA sends is the script Redis was loaded with.
"""
import argparse
import glob
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SPLICE = os.path.join(ROOT, "cmake", "lua_splice.cmake")
ARGS = None


def splice(script):
    """(returncode, spliced bytes or None, stderr)."""
    with tempfile.TemporaryDirectory(prefix="permitd-splice-") as tmp:
        out = os.path.join(tmp, "out.lua")
        done = subprocess.run(["cmake", "-DSCRIPT=" + script, "-DOUT=" + out, "-P", SPLICE],
                              capture_output=True)
        text = None
        if done.returncode == 0:
            with open(out, "rb") as f:
                text = f.read()
        return done.returncode, text, done.stderr.decode(errors="replace")


class Splice(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="permitd-splice-")
        self.dir = self.tmp.name
        os.mkdir(os.path.join(self.dir, "lib"))

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_lua_splice_replaces_each_directive_in_place(self):
        self.write("lib/a.lua", b"-- a\nlocal a = 1\n")
        self.write("lib/b_2.lua", b"local b = '; [[ ]] ${x} \\\\ \\0'")   # no final newline
        script = self.write("s.lua", b"-- @include a.lua\nlocal x = 1\n    -- @include b_2.lua\n"
                                     b"-- a comment: -- @include a.lua\nreturn x\n-- @include a.lua")
        rc, text, err = splice(script)
        self.assertEqual(rc, 0, err)
        self.assertEqual(text, b"-- a\nlocal a = 1\nlocal x = 1\nlocal b = '; [[ ]] ${x} \\\\ \\0'\n"
                               b"-- a comment: -- @include a.lua\nreturn x\n-- a\nlocal a = 1\n")

    def test_lua_splice_leaves_a_script_without_directives_as_it_is(self):
        data = b"--[[ x ]]\nlocal s = '\\31r; [[' .. \"\\0\"\r\n\n\xc2\xb5 end"
        rc, text, err = splice(self.write("plain.lua", data))
        self.assertEqual(rc, 0, err)
        self.assertEqual(text, data)

    def test_lua_splice_refuses_what_it_cannot_keep(self):
        self.write("lib/a.lua", b"local a\r\n")
        rc, text, err = splice(self.write("s.lua", b"-- @include a.lua\n"))
        self.assertNotEqual(rc, 0)
        self.assertIn("lib/a.lua holds carriage returns or NUL bytes", " ".join(err.split()))

    def test_lua_splice_names_a_missing_piece(self):
        script = self.write("s.lua", b"local x\n\n-- @include nothere.lua\n")
        rc, text, err = splice(script)
        self.assertNotEqual(rc, 0)
        err = " ".join(err.split())
        self.assertIn("s.lua line 3: includes nothere.lua", err)
        self.assertIn("lib/nothere.lua", err)

    def test_lua_splice_refuses_a_malformed_directive(self):
        rc, text, err = splice(self.write("s.lua", b"x\n-- @include ../up.lua\n"))
        self.assertNotEqual(rc, 0)
        self.assertIn('s.lua line 2: "-- @include ../up.lua" is no directive', " ".join(err.split()))

    def test_lua_splice_refuses_a_nested_include(self):
        self.write("lib/a.lua", b"local a\n")
        self.write("lib/n.lua", b"local n\n-- @include a.lua\n")
        rc, text, err = splice(self.write("s.lua", b"-- @include n.lua\n"))
        self.assertNotEqual(rc, 0)
        err = " ".join(err.split())
        self.assertIn("lib/n.lua (included by s.lua line 1) includes another file", err)


class Scripts(unittest.TestCase):

    def test_lua_splice_every_script_of_lua(self):
        scripts = sorted(glob.glob(os.path.join(ROOT, "lua", "*.lua")))
        self.assertTrue(scripts)
        for script in scripts:
            with open(script, "rb") as f:
                source = f.read()
            rc, text, err = splice(script)
            self.assertEqual(rc, 0, err)
            self.assertIsNone(re.search(rb"(?m)^[ ]*-- @include ", text), script)
            for name in re.findall(rb"(?m)^[ ]*-- @include (\S+)$", source):
                with open(os.path.join(ROOT, "lua", "lib", name.decode()), "rb") as f:
                    self.assertIn(f.read().rstrip(b"\n"), text, "%s: %s" % (script, name))

    def test_lua_splice_the_binary_embeds_the_spliced_scripts(self):
        if not ARGS or not ARGS.embedded:
            self.skipTest("needs --embedded (tests/unit/CMakeLists.txt passes it)")
        with open(ARGS.embedded) as f:
            c = f.read()
        arrays = dict(re.findall(r"static const char lua_script_(\w+)\[\] = \{([^}]*)\};", c))
        # {name, data, len, sha1, gz, gz_len}: the scripts are not gzipped
        table = re.findall(r'\{"([^"]+)", lua_script_(\w+), (\d+), "([0-9a-f]{40})", NULL, 0\}', c)
        self.assertEqual(sorted(t[0] for t in table),
                         sorted(os.path.basename(s) for s in glob.glob(os.path.join(ROOT, "lua", "*.lua"))))
        for name, ident, length, sha in table:
            data = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", arrays[ident]))
            rc, text, err = splice(os.path.join(ROOT, "lua", name))
            self.assertEqual(rc, 0, err)
            self.assertEqual(data, text, "%s: the binary holds the spliced text" % name)
            self.assertEqual(int(length), len(text), name)
            self.assertEqual(sha, hashlib.sha1(text).hexdigest(), "%s: its SHA-1 is the spliced text's" % name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--embedded", help="the build's lua_script_files.c")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
