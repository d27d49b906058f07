# SPDX-License-Identifier: LGPL-2.1-or-later
# The escape suite (test_escape.py), every test of it, run again on sandboxes whose root is an image (issue
# 24): a userland made of a few of the host's Debian packages (images_helpers.host_userland_tar()), imported
# like any image, with nothing of the host's tree visible.
import pytest

import kernel
import test_escape
from images_helpers import Jobs, host_userland_tar, import_image, remove_image
from test_escape import *  # noqa: F401,F403 (the tests themselves, collected here again)

IMAGE = "escape24"

pytestmark = [test_escape.pytestmark,
              pytest.mark.skipif(not kernel.disk_images_possible(),
                                 reason="image sandboxes keep their writable layer on a disk image, which this "
                                        "kernel cannot give them (no loop devices or ext4)")]


@pytest.fixture(scope="module")
def userland_image():
    jobs = Jobs()
    try:
        remove_image(IMAGE)
        assert import_image(jobs, IMAGE, host_userland_tar())[1] == "done"
    finally:
        jobs.close()
    yield IMAGE
    remove_image(IMAGE)


@pytest.fixture(scope="module")
def world(userland_image):  # noqa: F811 (this module's sandboxes are the image's)
    w = test_escape.World(image=userland_image)
    for sid in (w.a, w.b, w.h):
        assert str(w.mgr.props(w.mgr.iface.GetSandbox(sid))["Image"]) == userland_image
        code, out, _, _ = w.mgr.exec(sid, ["cat", "/usr/bin/marker"])
        assert (code, out) == (0, b"userland image\n")
    yield w
    w.close()
