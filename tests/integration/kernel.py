# SPDX-License-Identifier: LGPL-2.1-or-later
# What this machine's kernel lets the suite check: the answers of tests/probe/sandboxd-kernel-probe (built
# without sanitizers, run outside any sandbox and its filter), once per run. docs/testing.md ("What the
# kernel decides") lists each feature and what the tests check in each of its states.
import collections
import functools
import os
import subprocess

Feature = collections.namedtuple("Feature", "name state detail")


def probe_path():
    path = os.environ.get("SANDBOXD_KERNEL_PROBE")
    if path:
        return path
    # run by hand from the source tree: the default build directory's probe
    return os.path.join(os.getcwd(), "build-test/tests/probe/sandboxd-kernel-probe")


@functools.lru_cache(maxsize=None)
def features():
    """name → Feature; SANDBOXD_TEST_KERNEL (passed through by the harness) forces a state."""
    out = subprocess.run([probe_path()], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        name, state, detail = line.split("\t", 2)
        found[name] = Feature(name, state, detail)
    return found


def forced(feature):
    return "forced by SANDBOXD_TEST_KERNEL" in feature.detail


def describe(feature):
    return f"{feature.name}: {feature.state} ({feature.detail})"


def disk_images_possible():
    """sandboxd's DiskMax= needs loop devices and ext4 in the kernel."""
    f = features()
    return f["loop"].state == "present" and f["ext4"].state == "present"
