# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 29, part 4: sandbox-auditd copies its rows to PostgreSQL ([PostgreSQL] URL=), in id order and each once,
# through PostgreSQL stopping and coming back and a kill -9 of the logger. PostgreSQL is started by the test
# (test_scale_keystore.py's scratch server) and removed afterwards.
import os
import subprocess

import pytest

from conftest import assert_config_refused, audit_log, run, wait_for
from test_scale_keystore import PG_BIN, PG_URL, Postgres

DROPIN = "/etc/sandboxd/sandbox-auditd.conf.d/60-test-pg.conf"
HOST = "host-x"

pytestmark = pytest.mark.skipif(not os.path.exists(PG_BIN + "/initdb"),
                                reason=f"no {PG_BIN}/initdb (Debian's postgresql-15)")


@pytest.fixture(scope="module")
def pg():
    p = Postgres()
    p.start()
    os.makedirs(os.path.dirname(DROPIN), exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write(f"[PostgreSQL]\nURL={PG_URL}\nHost={HOST}\n")
    run("systemctl", "restart", "sandbox-auditd.service")
    try:
        yield p
    finally:
        os.unlink(DROPIN)
        run("systemctl", "restart", "sandbox-auditd.service")
        subprocess.run(["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", f"{PG_BIN}/pg_ctl",
                        "-D", f"{p.dir}/data", "-m", "fast", "-w", "stop"], capture_output=True)
        p.remove()


def local_ids():
    return sorted(int(r["id"]) for r in audit_log(limit=1000))


def copied_ids(pg, since=0):
    out = pg.sql(f"SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM audit_rows "
                 f"WHERE host = '{HOST}' AND id >= {int(since)}")
    return [int(i) for i in out.split(",") if i]


def caught_up(pg):
    # the logger's newest 1000 rows, all copied: a log that earlier tests made longer than that (the whole
    # suite in one instance) has older rows too, which the copy must have passed to reach these
    want = local_ids()
    return want and copied_ids(pg, since=want[0]) == want


def journal():
    return run("journalctl", "-b", "-u", "sandbox-auditd.service", "--no-pager").stdout


def test_rows_copied_in_order_each_once(pg, mgr, sandbox):
    sid, _ = sandbox()
    for i in range(5):
        mgr.exec(sid, ["echo", str(i)])
    wait_for(lambda: caught_up(pg), timeout=60, what="the copy to catch up")
    # a row as the logger has it
    row = next(r for r in audit_log(session=sid) if str(r["operation"]) == "exec")
    got = pg.sql(f"SELECT session_id, operation, event, exit_code, started_at FROM audit_rows "
                 f"WHERE host = '{HOST}' AND id = {int(row['id'])}")
    assert got == f"{sid}|exec|{row['event']}|{int(row['exit_code'])}|{int(row['started_at'])}", got
    assert f"Copying the audit log to PostgreSQL as host {HOST}." in journal()


def test_postgres_away_then_back_catches_up(pg, mgr, sandbox):
    sid, _ = sandbox()
    pg.stop()
    try:
        for i in range(5):
            mgr.exec(sid, ["echo", "while away", str(i)])
        # the logger keeps recording (its own log is the record; sandboxd's spool hands rows over a moment later)
        wait_for(lambda: len([r for r in audit_log(session=sid) if str(r["operation"]) == "exec"]) == 5,
                 what="the rows in the logger's own log")
        # and says, once, that it cannot copy them
        wait_for(lambda: "Cannot copy the audit log to PostgreSQL" in journal(), what="the logger's warning")
    finally:
        pg.start()
    wait_for(lambda: caught_up(pg), timeout=60, what="the rows made while PostgreSQL was away")
    assert pg.sql(f"SELECT count(*) = count(DISTINCT id) FROM audit_rows WHERE host = '{HOST}'") == "t"
    assert journal().count("Cannot copy the audit log to PostgreSQL") == 1
    wait_for(lambda: "Copying the audit log to PostgreSQL again." in journal(), what="the logger's all clear")


def test_logger_killed_goes_on_from_what_postgres_holds(pg, mgr, sandbox):
    sid, _ = sandbox()
    mgr.exec(sid, ["echo", "before"])
    wait_for(lambda: caught_up(pg), timeout=60, what="the copy before the kill")
    run("systemctl", "kill", "-s", "KILL", "sandbox-auditd.service")
    run("systemctl", "reset-failed", "sandbox-auditd.service", check=False)
    run("systemctl", "start", "sandbox-auditd.service")
    for i in range(3):
        mgr.exec(sid, ["echo", "after", str(i)])
    wait_for(lambda: caught_up(pg), timeout=60, what="the copy after the kill")
    assert pg.sql(f"SELECT count(*) = count(DISTINCT id) FROM audit_rows WHERE host = '{HOST}'") == "t"


def test_bad_url_keeps_the_logger_from_starting(pg):
    assert_config_refused("sandbox-auditd.service", DROPIN, "[PostgreSQL]\nURL=http://db/x\n", "Invalid URL=http://db/x",
                          restore=f"[PostgreSQL]\nURL={PG_URL}\nHost={HOST}\n")
