# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 23 through the gateway: network "egress" and its egress_policy on POST /v1/sandboxes, the policy,
# address and counters in the sandbox object, PUT /v1/sandboxes/{id}/network (SetNetworkPolicy), and bad
# input and refused keys that change nothing. Traffic goes only to test_egress.py's fake internet.
import json

import dbus
import pytest

from conftest import audit_log, wait_for
from gateway_helpers import Client, admin, assert_error, cli_key, up  # noqa: F401
from test_egress import UP_ADDRS, upstream  # noqa: F401  (the fake internet, and the harness's uplink)

ALLOWED, OTHER = UP_ADDRS[0], UP_ADDRS[1]  # 203.0.113.10, 198.51.100.10
COUNTERS = {"allowed_packets", "allowed_bytes", "denied_packets", "denied_bytes"}


@pytest.fixture
def made(admin):
    """Sandboxes made through the gateway (their JSON), deleted afterwards with the admin key."""
    ids = []

    def make(**body):
        body.setdefault("type", "small")
        r = admin.post("/v1/sandboxes", body)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
        return r.json()

    yield make
    for sid in ids:
        r = admin.delete(f"/v1/sandboxes/{sid}")
        assert r.status_code in (204, 404), r.text


def reachable(client, sid, addr):
    r = client.post(f"/v1/sandboxes/{sid}/exec", {"argv": ["curl", "-s", "-S", "-m", "3", f"http://{addr}:8080/"]})
    assert r.status_code == 200, r.text
    res = r.json()
    return res["exit_code"] == 0 and "upstream says hello" in res["stdout"]


def bus_policy(sid):
    """The EgressPolicy property as sandboxd has it, for comparisons that do not trust the gateway."""
    bus = dbus.SystemBus()
    mgr = dbus.Interface(bus.get_object("org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", introspect=False),
                         "org.sandboxd.sandbox1.Manager")
    path = mgr.GetSandbox(sid)
    p = bus.get_object("org.sandboxd.sandbox1", path).Get("org.sandboxd.sandbox1.Sandbox", "EgressPolicy",
                                                          dbus_interface=dbus.PROPERTIES_IFACE)
    return {"default": str(p["default"]), "allow": [str(x) for x in p["allow"]], "deny": [str(x) for x in p["deny"]]}


def test_create_with_policy_shows_policy_address_and_counters(admin, upstream, made):
    sb = made(network="egress", egress_policy={"default": "deny", "allow": ["203.0.113.0/24"]})
    sid = sb["id"]
    assert sb["network"] == "egress"
    assert sb["egress_policy"] == {"default": "deny", "allow": ["203.0.113.0/24"], "deny": []}
    assert set(sb["egress"]) == {"address", "counters"} and set(sb["egress"]["counters"]) == COUNTERS
    assert sb["egress"]["address"].startswith("10.237."), sb
    assert sb["egress_policy"] == bus_policy(sid)

    before = admin.get(f"/v1/sandboxes/{sid}").json()["egress"]["counters"]
    assert reachable(admin, sid, ALLOWED)
    after = admin.get(f"/v1/sandboxes/{sid}").json()["egress"]["counters"]
    assert after["allowed_packets"] > before["allowed_packets"] and after["allowed_bytes"] > before["allowed_bytes"]
    assert not reachable(admin, sid, OTHER)
    denied = admin.get(f"/v1/sandboxes/{sid}").json()["egress"]["counters"]
    assert denied["denied_packets"] > after["denied_packets"], (after, denied)

    # the list carries the same fields
    listed = [s for s in admin.get("/v1/sandboxes").json()["sandboxes"] if s["id"] == sid]
    assert len(listed) == 1 and listed[0]["egress_policy"] == sb["egress_policy"]
    assert listed[0]["egress"]["address"] == sb["egress"]["address"]

    # without a policy: the type's (default deny, no entries)
    plain = made(network="egress")
    assert plain["egress_policy"] == {"default": "deny", "allow": [], "deny": []}
    # network none: both null
    none = made()
    assert none["network"] == "none" and none["egress_policy"] is None and none["egress"] is None


def test_put_replaces_the_policy(admin, upstream, made):
    sid = made(network="egress", egress_policy={"allow": ["203.0.113.0/24"], "deny": ["evil.example.test"]})["id"]
    assert reachable(admin, sid, ALLOWED) and not reachable(admin, sid, OTHER)

    r = admin.req("PUT", f"/v1/sandboxes/{sid}/network", json={"egress_policy": {"allow": ["198.51.100.0/24"]}})
    assert r.status_code == 200, r.text
    sb = r.json()
    # the whole policy is replaced: the old deny list goes too, the default is sandboxd's
    assert sb["egress_policy"] == {"default": "deny", "allow": ["198.51.100.0/24"], "deny": []}
    # the answer is the object as GET gives it (the counters move with any packet: left out)
    got = admin.get(f"/v1/sandboxes/{sid}").json()
    assert {k: v for k, v in got.items() if k != "egress"} == {k: v for k, v in sb.items() if k != "egress"}
    assert got["egress"]["address"] == sb["egress"]["address"]
    assert bus_policy(sid) == sb["egress_policy"]
    assert reachable(admin, sid, OTHER) and not reachable(admin, sid, ALLOWED)

    # audited as sandbox.update with the gateway's request id, the new policy in the row
    rid = r.headers["X-Request-Id"]
    rows = wait_for(lambda: [x for x in audit_log(session=sid, operation="sandbox.update")
                             if str(x["request_id"]) == rid], what="the sandbox.update row")
    assert str(rows[0]["source"]) == "agent" and str(rows[0]["event"]) == "finished"
    detail = json.loads(str(rows[0]["detail"]))
    assert detail["egress_policy"] == sb["egress_policy"], detail
    assert detail["egress_policy_before"] == {"default": "deny", "allow": ["203.0.113.0/24"],
                                              "deny": ["evil.example.test"]}, detail

    # default allow with a deny list, by name and CIDR
    # by a member's key, as PATCH takes one on any sandbox its scope holds
    member = Client(cli_key("--preset=member", "--ttl=1h")[0])
    r = member.req("PUT", f"/v1/sandboxes/{sid}/network",
                   json={"egress_policy": {"default": "allow", "deny": ["203.0.113.0/24", "*.example.test"]}})
    assert r.status_code == 200, r.text
    assert r.json()["egress_policy"] == {"default": "allow", "allow": [], "deny": ["203.0.113.0/24", "*.example.test"]}
    assert reachable(admin, sid, OTHER) and not reachable(admin, sid, ALLOWED)


BAD_POLICIES = [
    ([], "Field 'egress_policy' must be an object."),
    ("deny", "Field 'egress_policy' must be an object."),
    (None, "Field 'egress_policy' must be an object."),
    ({"default": "deny", "extra": 1}, "Unknown field 'egress_policy.extra'."),
    ({"allow": "pypi.org"}, "Field 'egress_policy.allow' must be an array of strings."),
    ({"deny": [1]}, "Field 'egress_policy.deny' must be an array of strings."),
    ({"default": False}, "Field 'egress_policy.default' must be a string."),
]
# Refused by sandboxd (InvalidArgs), its message passed on: the part of it the test relies on.
BAD_ENTRIES = [
    ({"default": "maybe"}, "maybe"),
    ({"allow": ["10.0.0.1/8"]}, "host bits"),
    ({"allow": ["pypi..org"]}, "pypi..org"),
    ({"deny": ["foo.*.example.test"]}, "foo.*.example.test"),
    ({"allow": [f"h{i}.example.test" for i in range(300)]}, "256"),
]


def ids(admin):
    return sorted(s["id"] for s in admin.get("/v1/sandboxes").json()["sandboxes"])


def test_bad_input_on_create_changes_nothing(admin, upstream):
    before = ids(admin)
    for pol, msg in BAD_POLICIES:
        assert_error(admin.post("/v1/sandboxes", {"type": "small", "network": "egress", "egress_policy": pol}),
                     400, "invalid_request", msg)
    for pol, want in BAD_ENTRIES:
        body = assert_error(admin.post("/v1/sandboxes", {"type": "small", "network": "egress",
                                                         "egress_policy": pol}), 400, "invalid_request")
        assert want in body["error"], (pol, body)
    # a policy needs network egress
    body = assert_error(admin.post("/v1/sandboxes", {"type": "small", "egress_policy": {"default": "allow"}}),
                        400, "invalid_request")
    assert "egress" in body["error"], body
    assert ids(admin) == before


def test_bad_input_on_put_changes_nothing(admin, upstream, made):
    sb = made(network="egress", egress_policy={"allow": ["203.0.113.0/24"]})
    sid, want = sb["id"], sb["egress_policy"]
    url = f"/v1/sandboxes/{sid}/network"
    assert_error(admin.req("PUT", url), 400, "invalid_request", "Field 'egress_policy' is required.")
    assert_error(admin.req("PUT", url, json={}), 400, "invalid_request", "Field 'egress_policy' is required.")
    assert_error(admin.req("PUT", url, data=b"[1]"), 400, "invalid_request", "The JSON body must be an object.")
    assert_error(admin.req("PUT", url, data=b"{\"egress_policy\":"), 400, "invalid_json")
    assert_error(admin.req("PUT", url, json={"egress_policy": {}, "network": "none"}), 400, "invalid_request",
                 "Unknown field 'network'.")
    for pol, msg in BAD_POLICIES:
        assert_error(admin.req("PUT", url, json={"egress_policy": pol}), 400, "invalid_request", msg)
    # a NUL would cut the entry short on the bus: refused before it gets there
    body = assert_error(admin.req("PUT", url, data=b'{"egress_policy":{"allow":["pypi.org\\u0000.evil.test"]}}'),
                        400, "invalid_request")
    assert "NUL" in body["error"], body
    for pol, frag in BAD_ENTRIES:
        body = assert_error(admin.req("PUT", url, json={"egress_policy": pol}), 400, "invalid_request")
        assert frag in body["error"], (pol, body)
    assert admin.get(f"/v1/sandboxes/{sid}").json()["egress_policy"] == want
    assert bus_policy(sid) == want
    assert reachable(admin, sid, ALLOWED) and not reachable(admin, sid, OTHER)


def test_put_not_egress_or_unknown(admin, upstream, made):
    none = made()["id"]
    body = {"egress_policy": {"default": "allow"}}
    assert_error(admin.req("PUT", f"/v1/sandboxes/{none}/network", json=body), 409, "not_egress")
    assert admin.get(f"/v1/sandboxes/{none}").json()["egress_policy"] is None
    assert_error(admin.req("PUT", "/v1/sandboxes/sb_aaaaaaaaaa/network", json=body), 404, "not_found")
    assert_error(admin.req("PUT", "/v1/sandboxes/no-such-name/network", json=body), 404, "not_found")


def test_put_refused_keys(admin, upstream, made):
    other = made()["id"]
    sb = made(network="egress")
    sid, want = sb["id"], sb["egress_policy"]
    body = {"egress_policy": {"default": "allow"}}
    # a key scoped to another sandbox, and one without sandbox.update
    scoped = Client(cli_key("--preset=admin", f"--sandboxes={other}", "--ttl=1h")[0])
    assert_error(scoped.req("PUT", f"/v1/sandboxes/{sid}/network", json=body), 403, "forbidden",
                 f"Sandbox {sid} is outside this API key's scope.")
    reader = Client(cli_key("--role=member", "--actions=sandbox.read", "--ttl=1h")[0])
    assert_error(reader.req("PUT", f"/v1/sandboxes/{sid}/network", json=body), 403, "forbidden",
                 "This API key lacks the action 'sandbox.update'.")
    assert admin.get(f"/v1/sandboxes/{sid}").json()["egress_policy"] == want
    assert bus_policy(sid) == want
    # both refusals are on the record as denied sandbox.update rows of that sandbox
    rows = audit_log(session=sid, operation="sandbox.update", event="denied")
    assert len(rows) == 2, rows
    assert all(json.loads(str(r["detail"]))["status"] == 403 for r in rows)
