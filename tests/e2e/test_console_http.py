"""The console's listener over plain HTTP: who gets in, cookies, CSRF, rights,
and a read-only server. The browser tests (test_console_browser.py) drive
the same API through the page; these check what a browser would not show."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest

from tests.e2e.box15proc import Box15Client, free_port
from tests.e2e.cluster import start_primary, start_replica
from tests.e2e.serverproc import (
    USERS_TOML,
    RawClient,
    ServerProc,
    StartServer,
    login_tester,
    unique,
)
from tests.e2e.webclient import Web, http_port
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def console(server: ServerProc) -> Any:
    """The module's server (users tester and reader) restarted with the listener on."""
    server.stop()
    server.args += ["--http-listen", "127.0.0.1:0"]
    server.start()
    return server


@pytest.fixture
def web(console: ServerProc) -> Web:
    return Web(http_port(console))


def logged_in(web: Web, user: str = "tester", password: str = "secret") -> Web:
    assert web.login(user, password).status == 303
    return web


def tube_with_tasks(server: ServerProc, n: int = 2) -> str:
    tube = unique("web")
    conn = login_tester(server.port)
    try:
        conn.call("queue.create_tube", tube, "fifottl", {})
        for i in range(n):
            conn.call(f"queue.tube.{tube}:put", {"n": i})
    finally:
        conn.close()
    return tube


def with_user(start_server: StartServer, user: str) -> ServerProc:
    """A server with the console on, its users USERS_TOML's and `user` (a TOML table)."""
    return start_server("--http-listen", "127.0.0.1:0", toml=f"{USERS_TOML}\n{user}\n")


def ready_count(server: ServerProc, tube: str) -> int:
    conn = login_tester(server.port)
    try:
        return int(conn.call("queue.statistics", tube).data[0]["tasks"]["ready"])
    finally:
        conn.close()


def test_with_users_the_console_needs_a_login(web: Web) -> None:
    page = web.get("/")
    assert page.status == 303 and page.headers["Location"] == "/login"
    assert web.get("/api/overview").status == 401
    assert web.post("/api/tubes", {"name": "x", "type": "fifo"}).status == 401
    form = web.get("/login")
    assert form.status == 200 and 'name="password"' in form.text
    # What machines and the login page need stays open.
    assert web.get("/healthz").status == 200
    assert web.get("/metrics").status == 200
    assert web.get("/static/console.js").status == 200


def test_a_login_sets_strict_httponly_cookies_and_puts_no_secret_in_a_page(
    web: Web, console: ServerProc
) -> None:
    wrong = web.login("tester", "nope")
    assert wrong.status == 401 and "Wrong user or password" in wrong.text
    assert not web.cookies
    assert "console login failed" in console.log()
    right = web.login("tester", "secret")
    assert right.status == 303 and right.headers["Location"] == "/"
    (session,) = [h for h in right.set_cookie_headers if h.startswith("queuebox_session=")]
    assert "HttpOnly" in session and "SameSite=Strict" in session
    (csrf,) = [h for h in right.set_cookie_headers if h.startswith("queuebox_csrf=")]
    assert "SameSite=Strict" in csrf
    page, overview = web.get("/"), web.get("/api/overview")
    assert page.status == 200 and overview.json()["user"] == "tester"
    for secret in web.cookies.values():
        assert secret not in page.text and secret not in overview.text
    assert web.post("/logout").status == 200
    assert web.get("/api/overview").status == 401


def test_an_action_without_its_csrf_token_is_refused(web: Web, console: ServerProc) -> None:
    tube = tube_with_tasks(console, 0)
    logged_in(web)
    put = f"/api/tubes/{tube}/put"
    for token in (None, "", "forged"):
        refused = web.post(put, {"data": "x"}, csrf=token)
        assert refused.status == 403
        assert "CSRF" in refused.json()["error"]["message"]
    assert ready_count(console, tube) == 0
    done = web.post(put, {"data": {"a": [1, 2]}})
    assert done.status == 200, done.text
    assert done.json()["result"][0][2] == {"kind": "json", "text": '{"a": [1, 2]}', "size": 6}
    assert ready_count(console, tube) == 1


def test_a_user_without_the_right_sees_the_refusal(web: Web, console: ServerProc) -> None:
    tube = tube_with_tasks(console)
    logged_in(web, "reader", "readpw")
    overview = web.get("/api/overview").json()
    assert overview["can"] == {"read": True, "write": False, "admin": False, "create": False}
    assert tube in [t["name"] for t in overview["tubes"]]
    for action, body in (("put", {"data": 1}), ("truncate", {}), ("delete", {"task_id": 0})):
        refused = web.post(f"/api/tubes/{tube}/{action}", body)
        assert refused.status == 403, refused.text
        name = f"queue.tube.{tube}:{action}"
        assert refused.json()["error"] == {
            "code": 42,
            "message": f"Execute access to function '{name}' is denied for user 'reader'",
        }
    assert ready_count(console, tube) == 2
    (row,) = [t for t in overview["tubes"] if t["name"] == tube]
    assert not any(row["can"].values())
    # Reading is allowed: the tasks page.
    page = web.get(f"/api/tubes/{tube}/tasks?state=ready").json()
    assert [t["id"] for t in page["tasks"]] == [0, 1] and page["next"] is None


def test_a_form_posted_from_another_site_cannot_log_in(web: Web) -> None:
    refused = web.login("tester", "secret", origin="http://elsewhere.example")
    assert refused.status == 403 and not web.cookies


def test_tasks_are_paged_and_shown_readably(web: Web, console: ServerProc) -> None:
    tube = unique("paged")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifottl", {})
        for i in range(55):
            conn.call(f"queue.tube.{tube}:put", {"n": i, "bin": b"\x00\xff"}, {"pri": 3})
        conn.call(f"queue.tube.{tube}:put", b"\x01\x02", {"pri": 3})
    finally:
        conn.close()
    logged_in(web)
    first = web.get(f"/api/tubes/{tube}/tasks?state=ready").json()
    assert len(first["tasks"]) == 50 and first["next"] == [3, 49]
    task = first["tasks"][0]
    assert task["id"] == 0 and task["state"] == "ready" and task["pri"] == 3
    assert task["data"] == {"kind": "json", "text": '{"n": 0, "bin": {"$bin": "00ff"}}', "size": 12}
    assert task["created"] > 1e9
    second = web.get(f"/api/tubes/{tube}/tasks?state=ready&after=3,49").json()
    assert [t["id"] for t in second["tasks"]] == list(range(50, 56)) and second["next"] is None
    assert second["tasks"][-1]["data"] == {"kind": "binary", "text": "0102", "size": 4}
    (row,) = [t for t in web.get("/api/overview").json()["tubes"] if t["name"] == tube]
    assert row["oldest_ready"]["estimated"] is False and 0 <= row["oldest_ready"]["seconds"] < 600
    bad = web.get(f"/api/tubes/{tube}/tasks?state=lost")
    assert bad.status == 400 and "Invalid value of state: lost" in bad.json()["error"]["message"]


def test_without_users_the_console_is_the_loopback_guests(start_server: StartServer) -> None:
    server = start_server("--http-listen", "127.0.0.1:0", toml="")
    web = Web(http_port(server))
    overview = web.get("/api/overview")
    assert overview.status == 200 and overview.json()["user"] == "guest"
    assert {"queuebox_session", "queuebox_csrf"} <= set(web.cookies)
    create = {"name": "open", "type": "fifo"}
    assert web.post("/api/tubes", create, csrf=None).status == 403  # CSRF holds here too
    assert web.post("/api/tubes", create).status == 200
    assert [t["name"] for t in web.get("/api/overview").json()["tubes"]] == ["open"]
    # A page of another site whose name now points at 127.0.0.1 (DNS rebinding)
    # gets no session; the names of loopback do.
    stranger = Web(web.port)
    rebound = stranger.request("GET", "/api/overview", headers={"Host": f"evil.example:{web.port}"})
    assert rebound.status == 401 and not stranger.cookies
    local = stranger.request("GET", "/api/overview", headers={"Host": f"localhost:{web.port}"})
    assert local.status == 200 and local.json()["user"] == "guest"


def test_every_answer_forbids_framing_and_foreign_scripts(web: Web) -> None:
    for path in ("/", "/login", "/api/overview", "/static/console.js"):
        policy = web.get(path).headers["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy, path


def test_a_read_only_server_shows_its_queue_and_refuses_changes(
    start_server: StartServer,
) -> None:
    server = start_server("--http-listen", "127.0.0.1:0")
    tube = tube_with_tasks(server, 3)
    server.stop()
    server.args += ["--read-only", "true"]
    server.start()
    web = logged_in(Web(http_port(server)))
    health = web.get("/healthz")
    assert (health.status, health.text.strip()) == (503, "INIT")
    overview = web.get("/api/overview").json()
    assert overview["server"]["state"] == "INIT"
    assert overview["cluster"]["role"] == "read_only" and overview["cluster"]["following"] is None
    (row,) = [t for t in overview["tubes"] if t["name"] == tube]
    assert row["tasks"]["ready"] == 3 and row["type"] == "fifottl"
    assert len(web.get(f"/api/tubes/{tube}/tasks").json()["tasks"]) == 3  # the view lists
    refused = web.post(f"/api/tubes/{tube}/put", {"data": 1})
    assert refused.status == 503 and refused.json()["error"]["code"] == 7


def test_per_tube_grants_hold_in_the_console(start_server: StartServer) -> None:
    server = with_user(start_server, '[users.jobber]\npassword = "jobpw"\nwrite = ["jobs*"]')
    conn = login_tester(server.port)
    try:
        for tube in ("jobs_a", "mail_a"):
            conn.call("queue.create_tube", tube, "fifo", {})
            conn.call(f"queue.tube.{tube}:put", "x")
    finally:
        conn.close()
    web = logged_in(Web(http_port(server)), "jobber", "jobpw")
    overview = web.get("/api/overview").json()
    assert [t["name"] for t in overview["tubes"]] == ["jobs_a"]
    # What the page may offer on the tube: the user's rights there, as the calls check them.
    can = overview["tubes"][0]["can"]
    assert {action for action, allowed in can.items() if allowed} == {
        *("put", "kick", "bury", "delete", "release", "retry"),
    }
    assert can["truncate"] is False and overview["can"]["create"] is False
    assert web.post("/api/tubes/jobs_a/put", {"data": 1}).status == 200
    refused = web.post("/api/tubes/mail_a/put", {"data": 1})
    assert refused.status == 403 and refused.json()["error"]["code"] == 42
    listing = web.get("/api/tubes/mail_a/tasks")
    assert listing.status == 403 and "queuebox.tasks" in listing.json()["error"]["message"]
    assert ready_count(server, "jobs_a") == 2 and ready_count(server, "mail_a") == 1


def test_a_primary_and_its_replica_show_each_other(start_server: StartServer) -> None:
    primary = start_primary(start_server, "--http-listen", "127.0.0.1:0")
    tube = tube_with_tasks(primary, 2)
    replica = start_replica(start_server, primary, "--http-listen", "127.0.0.1:0")
    on_primary, on_replica = logged_in(Web(http_port(primary))), logged_in(Web(http_port(replica)))

    def replica_caught_up() -> bool:
        cluster = on_replica.get("/api/overview").json()["cluster"]
        following = cluster["following"]
        return bool(following and following["connected"] and following["lag_lsn"] == 0)

    wait_for(replica_caught_up, what="the replica to follow its primary")
    cluster = on_replica.get("/api/overview").json()["cluster"]
    assert cluster["role"] == "replica" and cluster["primary"] == f"127.0.0.1:{primary.port}"
    assert cluster["lsn"] == cluster["following"]["primary_lsn"] > 0
    (row,) = [t for t in on_replica.get("/api/overview").json()["tubes"] if t["name"] == tube]
    assert row["tasks"]["ready"] == 2  # the replica's own copy
    mine = on_primary.get("/api/overview").json()["cluster"]
    assert mine["role"] == "primary"
    (peer,) = mine["replicas"]
    assert peer["connected"] and peer["lag_lsn"] == 0


def test_connections_show_their_port_and_the_tasks_their_session_holds(
    start_server: StartServer,
) -> None:
    legacy = free_port()
    server = start_server(
        "--http-listen", "127.0.0.1:0", "--legacy-listen", f"127.0.0.1:{legacy}", toml=""
    )
    web = Web(http_port(server))
    with RawClient(server.port) as modern, Box15Client(legacy) as old:
        assert modern.call("queue.create_tube", "held", "fifo").error is None
        assert modern.call("queue.tube.held:put", "x").error is None
        assert modern.call("queue.tube.held:take", 0).error is None
        assert old.call("queue.put", "0", "t", "0", "0", "0", "0", "x").code == 0
        rows = web.get("/api/overview").json()["connections"]
        ports = sorted(row["port"] for row in rows)
        assert ports == ["1.5", "iproto"]
        (mine,) = [row for row in rows if row["port"] == "iproto"]
        assert mine["holds"] == [["held", 0]] and len(mine["session"]) == 36
        (tube,) = web.get("/api/overview").json()["tubes"]
        assert (tube["name"], tube["type"], tube["waiting_takes"]) == ("held", "fifo", 0)


def test_a_tester_may_do_everything_and_retries_one_task(web: Web, console: ServerProc) -> None:
    logged_in(web)
    tube = unique("again")
    create = {"name": tube, "type": "fifo", "opts": {"max_attempts": 3, "backoff": 2}}
    assert web.post("/api/tubes", create).status == 200
    overview = web.get("/api/overview").json()
    (row,) = [t for t in overview["tubes"] if t["name"] == tube]
    assert all(row["can"].values()) and overview["can"]["create"] is True
    assert row["opts"]["max_attempts"] == 3 and row["opts"]["backoff"] == 2
    for n in range(2):
        web.post(f"/api/tubes/{tube}/put", {"data": n})
        web.post(f"/api/tubes/{tube}/bury", {"task_id": n})
    done = web.post(f"/api/tubes/{tube}/retry", {"task_id": 1})
    assert done.status == 200 and done.json()["result"][0][:2] == [1, "r"]
    again = web.post(f"/api/tubes/{tube}/retry", {"task_id": 1})
    assert again.status == 400 and again.json()["error"]["message"] == "Task was not buried"
    one = web.get(f"/api/tubes/{tube}/tasks?id=0").json()["tasks"]
    assert [(t["id"], t["state"], t["attempts"]) for t in one] == [(0, "buried", 0)]


def test_a_tube_url_needs_a_login_and_the_login_lands_on_it(web: Web) -> None:
    page = web.get("/tubes/jobs/tasks/3")
    asked = urllib.parse.urlsplit(page.headers["Location"])
    assert page.status == 303 and asked.path == "/login"
    assert urllib.parse.parse_qs(asked.query) == {"next": ["/tubes/jobs/tasks/3"]}
    form = web.get(page.headers["Location"])
    assert 'name="next" value="/tubes/jobs/tasks/3"' in form.text
    landed = web.request(
        "POST",
        "/login",
        b"user=tester&password=secret&next=%2Ftubes%2Fjobs%2Ftasks%2F3",
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert landed.status == 303 and landed.headers["Location"] == "/tubes/jobs/tasks/3"
    assert web.get("/tubes/jobs?state=buried").status == 200  # the page; its script reads the URL
    # Never another site (an open redirect), nor a page that is not the console's.
    for elsewhere in ("//evil.example/", "https://evil.example/", "/tubes/\\evil", "/metrics"):
        body = urllib.parse.urlencode({"user": "tester", "password": "secret", "next": elsewhere})
        sent = web.request(
            "POST", "/login", body.encode(), {"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert sent.status == 303 and sent.headers["Location"] == "/", elsewhere


def test_a_tasks_result_is_read_as_the_user(start_server: StartServer) -> None:
    server = with_user(start_server, '[users.peeker]\npassword = "peekpw"\nread = ["jobs*"]')
    conn = login_tester(server.port)
    try:
        for tube in ("jobs_r", "mail_r"):
            conn.call("queue.create_tube", tube, "fifo", {"result_ttl": 60})
            conn.call(f"queue.tube.{tube}:put", "x")
            conn.call(f"queue.tube.{tube}:take", 0)
            conn.call(f"queue.tube.{tube}:ack", 0, {"result": {"sum": 3}})
        conn.call("queue.tube.jobs_r:put", "y", {"key": "k"})
    finally:
        conn.close()
    web = logged_in(Web(http_port(server)), "peeker", "peekpw")
    page = web.get("/api/tubes/jobs_r/tasks?id=0").json()
    assert page["tasks"] == []  # acked: gone, its result kept
    view = {"kind": "json", "text": '{"sum": 3}', "size": 6}
    assert page["result"] == {"status": "done", "result": view}
    assert web.get("/api/tubes/jobs_r/tasks?id=1").json()["result"] == {"status": "pending"}
    (row,) = web.get("/api/overview").json()["tubes"]
    assert row["opts"]["result_ttl"] == 60 and row["results"] == {"held": 1, "stored": 1}
    assert row["keys"] == {"held": 1, "matched": 0}
    refused = web.get("/api/tubes/mail_r/tasks?id=0")  # no read on mail_r: nothing of it
    assert refused.status == 403 and "result" not in refused.json()
