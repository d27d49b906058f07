# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs the Python SDK's own suite (sdk/python/tests) as part of the integration suite, so scripts/test counts it.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python", "tests"))

from test_sdk import *  # noqa: E402,F401,F403  (the tests and their fixtures)
from test_agent_server import *  # noqa: E402,F401,F403  (examples/agent_server.py, run for real)
# egress sandboxes' uplink: test_egress.py's fake internet, in place of test_sdk.py's skipping stand-in
from test_egress import upstream as sdk_uplink  # noqa: E402,F401
