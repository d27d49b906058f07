# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs the JavaScript SDK's own suite (node's test runner, sdk/js/test/) against this fleet, so that it
# counts in the integration suite: any failing node test fails this test, with the runner's report.
import os
import re
import shutil
import subprocess

from test_egress import upstream  # noqa: F401  (the fake internet the suite's egress test reaches)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SDK = os.path.join(ROOT, "sdk", "js")


def test_sdk_js_suite(upstream):
    node = shutil.which("node")
    assert node, "node is not installed (scripts/install-deps installs nodejs)"
    assert os.path.isdir(os.path.join(SDK, "node_modules", "ws")), \
        "sdk/js/node_modules is missing: run `npm ci` in sdk/js (scripts/test does)"
    p = subprocess.run([node, "--test", "--test-concurrency=1", "--test-reporter=tap", "test/"],
                       cwd=SDK, capture_output=True, text=True, timeout=1500,
                       env=dict(os.environ, SANDBOXD_TEST_FAKE_INTERNET="1"))
    out = p.stdout + p.stderr
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    failed = re.search(r"^# fail (\d+)$", out, re.M)
    assert passed and failed, out[-4000:]
    # A suite that ran nothing cannot pass.
    assert int(passed[1]) > 0, out[-4000:]
    assert p.returncode == 0 and int(failed[1]) == 0, out[-8000:]
