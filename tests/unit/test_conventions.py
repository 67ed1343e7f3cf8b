"""The conventions of STYLE.md that a reader relies on, checked on server/.

- Constructors that fail say why: every public *_new / *_start / *_open
  returns an int status (core/status.h) and takes a struct permitd_error *
  to fill with what failed, never a bare NULL or -1.
- No macro hides a function's signature from grep: no function-like macro
  expands to a function's head, and every handler a struct connect_method
  table names is defined as `static int name(void *ud, struct connect_call
  *call, ...)`, the connect_handler_fn it is.
- A file past 1,500 lines is several files, and each opens by saying what it
  holds: a comment whose first line names the file ("name.c - ...").
"""
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "..", "server")


def files(suffixes):
    for root, _, names in os.walk(SERVER):
        for name in sorted(names):
            if name.endswith(suffixes):
                path = os.path.join(root, name)
                with open(path) as f:
                    yield os.path.relpath(path, SERVER), f.read()


def without_comments(text):
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


# STYLE.md: a C file that passes 1,500 lines is several files.
FILE_LINES_MAX = 1500

# A prototype at file level: return type, name, parameters, ';'.
PROTOTYPE = re.compile(r"^([A-Za-z_][\w \t*]*?)\b(\w+)\s*\(([^;{}()]*)\)\s*;", re.M)


class ConventionsTest(unittest.TestCase):

    def test_conventions_constructors_say_why(self):
        bad, seen = [], 0
        for path, text in files((".h",)):
            for m in PROTOTYPE.finditer(without_comments(text)):
                ret, name, params = " ".join(m.group(1).split()), m.group(2), m.group(3)
                if not re.search(r"_(new|start|open)$", name):
                    continue
                seen += 1
                last = " ".join(params.split(",")[-1].split())
                if ret != "int" or not re.fullmatch(r"struct permitd_error \*\s*\w*", last):
                    bad.append("%s: %s %s(%s)" % (path, ret, name, " ".join(params.split())))
        self.assertGreater(seen, 10, "the prototype pattern found the constructors")
        self.assertEqual(bad, [], "constructors return an int status and fill a "
                                  "struct permitd_error * (last parameter)")

    def test_conventions_no_macro_defines_a_function(self):
        bad = []
        for path, text in files((".c", ".h")):
            text = without_comments(text).replace("\\\n", " ")
            for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)(.*)$", text, re.M):
                params = [p.strip() for p in m.group(2).split(",") if p.strip()]
                body = m.group(3)
                heads = [p for p in params
                         if re.search(r"\b(static|int|void|char|struct\s+\w+)\s*\**\s*"
                                      r"(\w*##\s*)?%s(\s*##\w*)?\s*\(" % re.escape(p), body)]
                if heads or re.search(r"\bstatic\b", body):
                    bad.append("%s: #define %s(%s)" % (path, m.group(1), m.group(2)))
        self.assertEqual(bad, [], "write functions out with their real signatures")

    def test_conventions_handlers_greppable(self):
        missing, seen = [], 0
        for path, text in files((".c",)):
            code = without_comments(text)
            for table in re.finditer(r"struct connect_method \w+\[\]\s*=\s*\{(.*?)\n\};",
                                     code, re.S):
                # the handler is each entry's last field: {..., fn} or M(..., fn)
                for fn in re.findall(r",\s*(\w+)\s*[)}],?\s*$", table.group(1), re.M):
                    if fn == "NULL":
                        continue
                    seen += 1
                    head = r"^static int %s\(void \*ud, struct connect_call \*call," % fn
                    if not re.search(head, code, re.M):
                        missing.append("%s: %s" % (path, fn))
        self.assertGreater(seen, 10, "the table pattern found the handlers")
        self.assertEqual(missing, [], "handlers defined with their real signature")

    def test_conventions_files_short_with_a_header(self):
        long, headless, seen = [], [], 0
        for path, text in files((".c", ".h")):
            seen += 1
            lines = text.count("\n")
            if lines >= FILE_LINES_MAX:
                long.append("%s: %d lines" % (path, lines))
            name = re.escape(os.path.basename(path))
            if not re.match(r"/\*\n \* %s - \S" % name, text):
                headless.append(path)
        self.assertGreater(seen, 100, "the walk found server/'s files")
        self.assertEqual(long, [], "a file of %d lines or more is several files (STYLE.md)"
                         % FILE_LINES_MAX)
        self.assertEqual(headless, [], 'each file opens with "/*\n * NAME - what it holds"')


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
