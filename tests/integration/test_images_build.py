# SPDX-License-Identifier: LGPL-2.1-or-later
# BuildImage (issue 24): the run's one real mmdebstrap build, from the Debian archive the host uses, then a
# sandbox on it. The build is kept for the rest of the run (test_escape_image.py runs the escape suite on it).
import dbus
import pytest

import kernel
from images_helpers import DEBIAN_PACKAGES, Jobs, archive_unreachable, debian_image, images, wait_row

UNREACHABLE = archive_unreachable()
pytestmark = [pytest.mark.skipif(not kernel.disk_images_possible(),
                                 reason="image sandboxes keep their writable layer on a disk image, which this "
                                        "kernel cannot give them (no loop devices or ext4)"),
              pytest.mark.skipif(UNREACHABLE is not None, reason=f"mmdebstrap cannot build: {UNREACHABLE}")]


@pytest.fixture(scope="module")
def jobs():
    j = Jobs()
    yield j
    j.close()


def test_build_and_run(jobs, mgr, sandbox):
    name, seconds = debian_image(jobs)
    if seconds is not None:
        print(f"mmdebstrap build of {name} ({', '.join(DEBIAN_PACKAGES)}): {seconds:.1f} s")
        phases = [p for job, ps in jobs.progress.items() for p, _, _ in ps]
        assert "mmdebstrap" in phases and "unpack" in phases and "sanitize" in phases, phases
        row = wait_row("image.build", f'"image":"{name}"')
        assert row["event"] == "finished"
    info = {str(k): v for k, v in images().GetImage(name).items()}
    assert str(info["source"]).startswith("mmdebstrap:bookworm/minbase+python3")
    assert info["digest"].startswith("sha256:") and info["size"] > 50 << 20
    sid, _ = sandbox(image=name)
    code, out, err, _ = mgr.sh(sid, "cat /etc/debian_version; python3 -c 'import sys; print(sys.version_info[0])'; "
                                    "id -un; test -u /usr/bin/su && echo setuid || echo no-setuid")
    lines = out.decode().split("\n")
    assert code == 0, err
    assert lines[0].startswith("12.") and lines[1] == "3" and lines[2] == "sandbox"
    assert lines[3] == "no-setuid"  # import hygiene cleared it; the mount is nosuid anyway
    # what the sandbox's user installs at run time goes to its own layer (pip --user style)
    code, out, err, _ = mgr.sh(sid, "mkdir -p ~/.local/lib && echo 'X = 42' > ~/.local/lib/mod.py && "
                                    "PYTHONPATH=~/.local/lib python3 -c 'import mod; print(mod.X)'")
    assert (code, out) == (0, b"42\n"), err
    # apt-get as the sandbox's user cannot install system packages: installs are user-level
    code, out, err, _ = mgr.sh(sid, "apt-get install -y --no-download hello 2>&1; echo rc=$?")
    assert b"rc=100" in out and (b"ermission denied" in out or b"are you root" in out), out


def test_cancel_build(jobs):
    job = str(images().BuildImage("cancelbuild24", dbus.Dictionary({"suite": "bookworm", "variant": "essential"},
                                                                   signature="sv"), timeout=120))
    images().CancelJob(job, dbus.Dictionary({}, signature="sv"))
    assert jobs.wait(job)[1] == "cancelled"
    assert "cancelbuild24" not in {str(r[0]) for r in images().ListImages()}


def test_build_over_rest_cancelled_when_the_client_leaves(jobs):
    """POST /v1/images builds with progress over SSE; the client leaves once mmdebstrap runs, which cancels
    the build (so the run still builds only one image)."""
    import json

    from gateway_helpers import Client, cli_key, gateway_up
    gateway_up()
    admin = Client(cli_key("--preset", "admin", "--ttl", "1h")[0])
    r = admin.req("POST", "/v1/images", data=json.dumps({"name": "restbuild24", "build": {"variant": "essential"}}),
                  headers={"Content-Type": "application/json", "Accept": "text/event-stream"}, stream=True,
                  timeout=600)
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
    job, phases, ev = None, [], {}
    for line in r.iter_lines(decode_unicode=True):
        if line == "":
            data = json.loads(ev.get("data", "{}"))
            if ev.get("event") == "job":
                job = data["job"]
            elif ev.get("event") == "progress":
                phases.append(data["phase"])
                if data["phase"] == "mmdebstrap":
                    break
            else:
                raise AssertionError(f"unexpected event {ev}")
            ev = {}
        elif not line.startswith(":"):
            k, _, v = line.partition(": ")
            ev[k] = v
    r.close()
    assert job and "mmdebstrap" in phases, phases
    assert jobs.wait(job)[1] == "cancelled"
    assert "restbuild24" not in {str(x[0]) for x in images().ListImages()}
    row = wait_row("image.build", f'"job":"{job}"')
    assert row["event"] == "failed" and "cancelled" in row["detail"] and row["account_id"].startswith("key:")
