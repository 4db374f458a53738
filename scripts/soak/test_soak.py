"""Unit tests of the soak's pure checks: `python3 -B scripts/soak/test_soak.py`."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402


class Checks(unittest.TestCase):
    def test_outcome_of_reads_cli_and_mcp_answers(self):
        self.assertEqual(soak.outcome_of({"ok": True, "woke": True})["outcome"], "delivered")
        self.assertEqual(soak.outcome_of({"ok": True, "queued": True})["outcome"], "queued")
        self.assertEqual(soak.outcome_of({"ok": False, "code": "stopped"}),
                         {"outcome": "refused", "code": "stopped"})

    def test_an_mcp_tool_error_is_a_refusal(self):
        res = {"content": [{"type": "text", "text": "peer \"p2\" offline"}], "isError": True}
        self.assertEqual(soak.outcome_of(soak.mcp_answer(res))["outcome"], "refused")
        ok = {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"ok": True}}
        self.assertEqual(soak.outcome_of(soak.mcp_answer(ok))["outcome"], "delivered")

    def test_delivery_lines_groups_ok_values_by_soak_topic(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("ts=1 ev=delivery path=cli caller=echo-a to=b ok=true topic=soak-1 len=2\n"
                    "ts=2 ev=delivery path=cli caller=echo-a to=x ok=false topic=soak-2 err=\"x\"\n"
                    "ts=3 ev=delivery-followup topic=soak-1 ok=false\n"
                    "ts=4 ev=delivery path=mcp caller=echo-b to=a ok=true topic=other\n")
        try:
            self.assertEqual(soak.delivery_lines(f.name),
                             {"soak-1": ["true"], "soak-2": ["false"]})
        finally:
            os.unlink(f.name)

    def test_delivery_lines_reads_rotated_copies(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "delivery.log")
            with open(path + ".1", "w") as f:
                f.write("ts=1 ev=delivery path=cli to=b ok=true topic=soak-1\n")
            with open(path, "w") as f:
                f.write("ts=2 ev=delivery path=cli to=b ok=false topic=soak-2\n")
            self.assertEqual(soak.delivery_lines(path),
                             {"soak-1": ["true"], "soak-2": ["false"]})

    def test_consistency_needs_the_matching_ok_value(self):
        lines = {"soak-1": ["true"], "soak-2": ["true"]}
        sends = [{"topic": "soak-1", "path": "cli", "outcome": "delivered"},
                 {"topic": "soak-2", "path": "mcp", "outcome": "refused", "code": "timeout"},
                 {"topic": "soak-3", "path": "cli", "outcome": "queued"},
                 {"topic": "soak-4", "path": "cli", "outcome": "hang"}]
        bad = soak.consistency_failures(sends, lines)
        self.assertEqual(len(bad), 2)
        self.assertIn("soak-2", bad[0])
        self.assertIn("soak-3", bad[1])

    def test_resource_bounds(self):
        start = {"fds": 18, "threads": 4, "rss_kib": 15000}
        self.assertEqual(soak.resource_failures(start, dict(start)), [])
        self.assertEqual(soak.resource_failures(start, {"fds": 26, "threads": 8,
                                                        "rss_kib": 15000 + 32768}), [])
        bad = soak.resource_failures(start, {"fds": 27, "threads": 9, "rss_kib": 48000})
        self.assertEqual(len(bad), 3)


if __name__ == "__main__":
    unittest.main()
