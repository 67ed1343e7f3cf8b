"""The layout of server/ as docs/architecture.md states it.

server/ is grouped by layer, core < transport < stores < decisions <
control < cli (every command-line verb), with main.c on top: a file
includes headers of its own layer and of the layers below it, never
above (an include that points up is how a lower layer starts to know a
higher one, and how cycles begin). And each library stays behind its
wrapper: only the files named here include it.
"""
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "..", "server")
LAYERS = ["core", "transport", "stores", "decisions", "control", "cli"]

# library header (as included) -> the files allowed to include it
WRAPPERS = {
    r"hiredis": {"stores/redis.c", "stores/redis_pipe.c", "stores/cluster.c",
                "stores/redis_notice.c", "stores/redis_tls.c", "stores/redis_sentinel.c",
                "stores/redis_script.c"},
    r"microhttpd\.h": {"transport/http.c", "transport/http_conn.c", "transport/http_recv.c"},
    r"mysql\.h": {"stores/dbconn.h", "stores/dbconn.c", "stores/store.c", "stores/apps.c",
                  "stores/gateway_rules.c", "stores/envoymap.c",
                  "stores/users.c", "stores/audit.c",
                  "stores/migrate_history.c", "stores/migrate_run.c",
                  "stores/policyrefs.c", "stores/overrides.c",
                  "stores/override_edits.c", "stores/trafficdb.c"},
    r"argon2\.h": {"control/auth.c"},
    r"jansson\.h": {"transport/json.c"},
    r"nettle/": {"core/sha256.c"},
    r"nghttp2/": {"transport/grpc.c", "transport/grpc_call.c", "transport/grpc_conn.c"},
}


def sources():
    for layer in LAYERS:
        for name in sorted(os.listdir(os.path.join(SERVER, layer))):
            if name.endswith((".c", ".h")):
                path = "%s/%s" % (layer, name)
                with open(os.path.join(SERVER, path)) as f:
                    yield layer, path, f.read()


class LayersTest(unittest.TestCase):

    def test_layers_every_file_sits_in_a_layer(self):
        stray = [n for n in os.listdir(SERVER)
                 if n.endswith((".c", ".h")) and n != "main.c"]
        self.assertEqual(stray, [], "server/ holds only main.c and the layers' folders")
        folders = sorted(n for n in os.listdir(SERVER)
                         if os.path.isdir(os.path.join(SERVER, n)))
        self.assertEqual(folders, sorted(LAYERS))

    def test_layers_no_include_points_up(self):
        up = []
        for layer, path, text in sources():
            for inc_layer, inc in re.findall(r'#include "([a-z]+)/([a-z_0-9]+\.h)"', text):
                self.assertIn(inc_layer, LAYERS, "%s includes %s/%s" % (path, inc_layer, inc))
                if LAYERS.index(inc_layer) > LAYERS.index(layer):
                    up.append("%s includes %s/%s" % (path, inc_layer, inc))
            for inc in re.findall(r'#include "([a-z_0-9]+\.h)"', text):
                up.append("%s includes \"%s\" without its layer" % (path, inc))
        self.assertEqual(up, [])

    def test_layers_each_library_behind_its_wrapper(self):
        seen = {k: set() for k in WRAPPERS}
        for _, path, text in sources():
            for lib in WRAPPERS:
                if re.search(r'#include <%s' % lib, text):
                    seen[lib].add(path)
        for lib, allowed in WRAPPERS.items():
            self.assertLessEqual(seen[lib], allowed, "%s included outside its wrapper" % lib)
            self.assertTrue(seen[lib], "nothing includes %s: update this table" % lib)


if __name__ == "__main__":
    unittest.main(verbosity=2)
