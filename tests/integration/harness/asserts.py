"""unittest assertions on Connect replies (DESIGN.md "Wire protocol"): an
error is a non-200 status, application/json, {"code", "message"}."""
from .http import content_type


class ConnectAssertions:
    """Mixin for unittest.TestCase: checks on Connect replies."""

    def assertConnectError(self, reply, status, code, contains=()):
        """A Connect error: `status`, application/json, {"code": code,
        "message": ...}, the message holding every string in `contains`.
        Returns the message."""
        self.assertEqual(reply.status, status, reply)
        self.assertEqual(content_type(reply), "application/json", reply)
        body = reply.json()
        self.assertEqual(body.get("code"), code, reply)
        message = body.get("message", "")
        self.assertIsInstance(message, str, reply)
        for s in ([contains] if isinstance(contains, str) else contains):
            self.assertIn(s, message, reply)
        return message

    def assertOk(self, reply, codec="application/json"):
        self.assertEqual(reply.status, 200, reply)
        self.assertEqual(content_type(reply), codec, reply)
