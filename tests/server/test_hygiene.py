"""What the service keeps to itself (issue 33): its API keys never reach a run's pytest
process, answers and pages name no absolute server path, slow clients cannot hold a
connection open by dribbling headers, idempotency keys belong to the API key that made them,
and a run that did not pass says why."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import subprocess
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import API_KEYS_ENV, KEYS, Service
from tests.server.guarded_uvicorn import guarded_uvicorn

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

#: A project conftest.py: every pytest process of a run records its environment.
ENV_PROBE = """
import json, os
from pathlib import Path

def _ancestors():
    pid = os.getppid()
    while pid > 1:
        yield pid
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])

def pytest_configure(config):
    out = Path(__file__).parent / "child-env"
    out.mkdir(exist_ok=True)
    # What the kernel shows of every ancestor's starting environment (the service's own
    # process among them), as far as this user may read it.
    seen = {}
    for pid in _ancestors():
        try:
            seen[str(pid)] = Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace")
        except OSError:
            pass
    (out / f"{os.getpid()}.json").write_text(json.dumps({"env": dict(os.environ), "seen": seen}))
"""


def _create(svc: Service, role: str = "EVAL", **body: Any) -> dict[str, Any]:
    with svc.client(role) as client:
        response = client.post("/api/eval/runs", json={"dataset": "demo-v1", **body})
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


# --------------------------------------------------------------------------- the child's env


@SQLITE_ONLY
@pytest.mark.parametrize("where", ["serve", "worker"])
def test_a_runs_pytest_process_inherits_no_api_key(service_factory: Any, where: str) -> None:
    svc: Service = service_factory()
    (svc.root / "conftest.py").write_text(ENV_PROBE, encoding="utf-8")
    if where == "serve":
        parent = svc.serve()  # its in-process worker starts the run
    else:
        svc.serve(workers=0)
        parent = svc.worker()  # a `goldeval worker` process, GOLDEVAL_API_KEYS in its env too
    assert "GOLDEVAL_API_KEYS" in svc.env
    run = svc.wait_status(_create(svc)["id"])
    assert run["status"] == "COMPLETED", run
    probes = list((svc.root / "child-env").glob("*.json"))
    assert probes, "the run's pytest process did not load the project conftest.py"
    for probe in probes:
        found = json.loads(probe.read_text(encoding="utf-8"))
        env = found["env"]
        assert "GOLDEVAL_STORE" in env  # the run's own process, with what it needs
        assert "GOLDEVAL_API_KEYS" not in env
        leaked = [name for name, value in env.items() for key in KEYS.values() if key in value]
        assert leaked == []
        # The service's process started with the keys: /proc/<its pid>/environ (the
        # kernel's copy, which os.environ.pop leaves) showed them to the run's conftest.py.
        assert parent.proc is not None
        assert str(parent.proc.pid) in found["seen"], sorted(found["seen"])
        exposed = [pid for pid, text in found["seen"].items() for k in KEYS.values() if k in text]
        assert exposed == []


#: Credentials a run's pytest process inherits from the worker (a provider key, a password
#: in a provider URL): the project's conftest.py prints them, then raises with one.
INHERITED = {
    "OPENAI_API_KEY": "sk-inherited-0123456789abcdef",
    "OLLAMA_HOST": "http://team:pa55-inherited-secret@127.0.0.1:9",
}
PRINTS_ITS_ENVIRONMENT = """
import os

def pytest_configure(config):
    print("env:", os.environ["OPENAI_API_KEY"], os.environ["OLLAMA_HOST"], flush=True)
    if os.environ.get("GOLDEVAL_STORE", "").startswith("postgresql://"):
        print("store:", os.environ["GOLDEVAL_STORE"], flush=True)
    if (config.rootpath / "crash").exists():
        raise RuntimeError("cannot reach " + os.environ["OLLAMA_HOST"])
"""


def test_credentials_a_run_inherits_are_masked_in_its_log_bundle_and_error(
    service_factory: Any,
) -> None:
    """A run's pytest process has the worker's provider credentials and the store URL (it
    needs them). What it prints went into the downloadable log bundle as it was, and an
    exception quoting one into the run's ``error``."""
    svc: Service = service_factory(env=INHERITED)
    (svc.root / "conftest.py").write_text(PRINTS_ITS_ENVIRONMENT, encoding="utf-8")
    svc.serve(workers=1)
    secrets = ["sk-inherited-0123456789abcdef", "pa55-inherited-secret"]
    if "://" in svc.store_url and "@" in svc.store_url:
        password = svc.store_url.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
        secrets += [password] if len(password) >= 8 else []
    done = svc.wait_status(_create(svc, idempotencyKey="done")["id"])
    assert done["status"] == "COMPLETED", done
    (svc.root / "crash").write_text("", encoding="utf-8")
    crashed = svc.wait_status(_create(svc, idempotencyKey="crash")["id"])
    assert crashed["status"] == "FAILED" and crashed["error"], crashed
    with svc.client("EVAL") as client:
        bundle = client.get(f"/api/eval/runs/{done['id']}/artifacts/LOG_BUNDLE")
        assert bundle.status_code == 200, bundle.text
        answers = [client.get(f"/api/eval/runs/{r['id']}").text for r in (done, crashed)]
    with zipfile.ZipFile(io.BytesIO(bundle.content)) as logs:
        log = "\n".join(logs.read(n).decode("utf-8", "replace") for n in logs.namelist())
    assert "env: *** http://team:***@127.0.0.1:9" in log, log[-2000:]
    assert "cannot reach http://team:***@127.0.0.1:9" in crashed["error"], crashed["error"]
    for text in (log, *answers, json.dumps(crashed)):
        assert not [s for s in secrets if s in text]


# --------------------------------------------------------------------------- no server paths


@SQLITE_ONLY
def test_answers_and_pages_name_no_absolute_server_path(service_factory: Any) -> None:
    svc: Service = service_factory()
    rows = svc.root / "golden" / "demo" / "demo.jsonl"
    good_rows = rows.read_text(encoding="utf-8")
    broken = svc.root / "golden" / "broken"
    broken.mkdir()
    (broken / "dataset.yaml").write_text("version: [\n", encoding="utf-8")
    svc.serve(workers=0)
    texts: dict[str, str] = {}
    with svc.client("EVAL") as client:
        unknown = client.post("/api/eval/runs", json={"dataset": "nope"})
        assert unknown.status_code == 422
        assert "golden/broken/dataset.yaml" in unknown.json()["detail"]  # names it, relatively
        texts["unknown dataset"] = unknown.text
        rows.write_text(good_rows + "{not json\n", encoding="utf-8")
        invalid = client.post("/api/eval/runs", json={"dataset": "demo-v1"})
        assert invalid.status_code == 422
        assert "golden/demo/demo.jsonl:3" in invalid.json()["detail"]
        texts["invalid row"] = invalid.text
        rows.write_text(good_rows, encoding="utf-8")
        queued = _create(svc)
        rows.write_text(good_rows + "{not json\n", encoding="utf-8")  # broken once queued
        svc.worker()
        failed = svc.wait_status(queued["id"])
        assert failed["status"] == "FAILED" and "golden/demo/demo.jsonl:3" in failed["error"]
        rows.write_text(good_rows, encoding="utf-8")
        done = svc.wait_status(_create(svc, idempotencyKey="second")["id"])
        assert done["status"] == "COMPLETED", done
        for path in (
            f"/api/eval/runs/{queued['id']}",
            f"/api/eval/runs/{done['id']}",
            "/api/eval/runs",
            "/ui/",
            f"/ui/runs/{done['id']}.html",
            f"/ui/runs/{done['id']}.html?compare={queued['id']}",  # 409: nothing graded
        ):
            texts[path] = client.get(path).text
    with svc.client("MONITOR") as monitor:
        texts["/readyz"] = monitor.get("/readyz").text
    with svc.client(None) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}  # liveness says nothing more
    ready = json.loads(texts["/readyz"])
    assert ready["status"] == "ok"
    assert set(ready["checks"]) == {"store", "schemaVersion", "migrations", "datasets"}
    leaks = [where for where, text in texts.items() if str(svc.root) in text]
    assert leaks == []
    # The run.json on disk no longer holds the project's absolute path either (its paths are
    # relative to the project root since issue 33), so the download cannot leak it.
    assert (
        str(svc.root)
        not in (svc.root / ".goldeval" / "runs" / done["storeRunId"] / "run.json").read_text()
    )


# --------------------------------------------------------------------------- idempotency scope

OTHER_EVAL_KEY = "second-eval-key-0123456789abcdef"


def test_idempotency_keys_belong_to_the_api_key_that_used_them(service_factory: Any) -> None:
    """The same Idempotency-Key from two API keys makes two runs (neither sees the other's);
    from one key, the first run again — also for concurrent requests."""
    svc: Service = service_factory(
        env={"GOLDEVAL_API_KEYS": API_KEYS_ENV + f",{OTHER_EVAL_KEY}:EVAL"}
    )
    svc.serve(workers=0)
    body = {"dataset": "demo-v1", "idempotencyKey": "ci-build-42"}

    def post(client: httpx.Client) -> httpx.Response:
        return client.post("/api/eval/runs", json=body)

    with svc.client("EVAL") as mine, svc.client(key=OTHER_EVAL_KEY) as theirs:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(post, [mine, theirs] * 6))
        ids = {a.json()["id"] for a in answers}
        assert len(ids) == 2, [a.text for a in answers]
        assert sorted(a.status_code for a in answers) == [200] * 10 + [202] * 2
        first = post(mine).json()["id"]
        second = post(theirs).json()["id"]
        assert first != second and {first, second} == ids
        # Another request under the same key: refused for its owner only.
        changed = {**body, "attempts": 2}
        assert mine.post("/api/eval/runs", json=changed).status_code == 409
        with svc.client("ADMIN") as admin:
            third = admin.post("/api/eval/runs", json=changed)
            assert third.status_code == 202, third.text
            assert third.json()["id"] not in ids
        listed = mine.get("/api/eval/runs").json()["items"]
        # Each key is shown to the API key that used it (and to ADMIN), not to the others: a
        # team read every other team's keys in the list.
        shown = {r["id"]: r["idempotencyKey"] for r in listed}
        theirs_shown = theirs.get(f"/api/eval/runs/{first}").json()["idempotencyKey"]
        mine_shown = mine.get(f"/api/eval/runs/{first}").json()["idempotencyKey"]
        with svc.client("ADMIN") as admin:
            everyone = admin.get("/api/eval/runs").json()["items"]
    assert len(listed) == 3
    assert shown == {first: "ci-build-42", second: None, third.json()["id"]: None}
    assert (mine_shown, theirs_shown) == ("ci-build-42", None)
    assert all(r["idempotencyKey"] == "ci-build-42" for r in everyone)
    assert OTHER_EVAL_KEY not in svc.server.output()  # type: ignore[union-attr]


# --------------------------------------------------------------------------- runs say why


@SQLITE_ONLY
def test_a_run_whose_finalisation_failed_says_why(service_factory: Any) -> None:
    """The run folder cannot be finished (a folder where the LATEST pointer goes, as a full
    disk would): the API's error names the reason the plugin printed, not null."""
    svc: Service = service_factory()
    latest = svc.root / ".goldeval" / "runs" / "LATEST"
    latest.mkdir(parents=True)
    (latest / "keep").write_text("not a pointer", encoding="utf-8")
    svc.serve()
    run = svc.wait_status(_create(svc)["id"])
    assert run["status"] == "FAILED" and run["passed"] is False, run
    assert run["exitCode"] == 75
    assert "LATEST is a directory" in run["error"], run
    assert ".goldeval/runs/LATEST" in run["error"] and str(svc.root) not in run["error"]
    assert run["exitDecision"]["code"] == run["exitCode"], run
    assert "LATEST is a directory" in run["exitDecision"]["reason"]

    # Resumed after the dataset changed: the plugin refuses the run key (another protocol,
    # exit 65) while the store still holds the first attempt. The API's decision is that of
    # the process that ended last, as its exit code is.
    latest.joinpath("keep").unlink()
    latest.rmdir()
    rows = svc.root / "golden" / "demo" / "demo.jsonl"
    rows.write_text(rows.read_text(encoding="utf-8").replace("Say", "Please say"), "utf-8")
    with svc.client("ADMIN") as admin:
        resumed = admin.post(f"/api/eval/runs/{run['id']}/resume")
        assert resumed.status_code == 200 and resumed.json()["status"] == "QUEUED"
    again = svc.wait_status(run["id"])
    assert again["exitCode"] == 65, again
    assert again["exitDecision"]["code"] == 65, again
    assert again["error"] and "refused before any item ran" in again["error"]
    assert again["passed"] is False


# --------------------------------------------------------------------------- header timeout


def _slow_client(port: int, stop_after: float) -> tuple[float, bytes]:
    """Send a request line, then one header byte pair every 0.2 s: (seconds until the server
    closed the connection, what it answered)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=stop_after) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        answer = b""
        while time.monotonic() - started < stop_after:
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except OSError:
                break
            sock.settimeout(0.2)
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
        return time.monotonic() - started, answer


@SQLITE_ONLY
def test_clients_that_dribble_headers_are_cut_at_the_header_timeout(service_factory: Any) -> None:
    svc: Service = service_factory()
    server = svc.serve("--header-timeout", "1", workers=0)
    assert server.port is not None
    with ThreadPoolExecutor(40) as pool:
        results = list(pool.map(lambda _: _slow_client(server.port, 8.0), range(40)))
    held = [seconds for seconds, _ in results]
    assert max(held) < 4.0, held  # 1 s, plus scheduling on a loaded machine; not 8
    assert all(answer.startswith(b"HTTP/1.1 408") for _, answer in results), results[:3]

    # A request whose headers arrived in time is never cut, however slow its body.
    body = json.dumps({"dataset": "nope"}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/eval/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"X-API-Key: {KEYS['EVAL']}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        )
        for byte in body:
            sock.sendall(bytes([byte]))
            time.sleep(2.5 / len(body))
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 422"), answer[:200]
        # The connection stays usable for the next request (keep-alive).
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    with svc.client(None) as client:
        assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("protocol", ["h11", "httptools"])
def test_the_header_deadline_works_on_both_uvicorn_protocols(protocol: str) -> None:
    """uvicorn picks httptools when installed, else h11: the guard wraps either."""
    with guarded_uvicorn(protocol, 1.0) as port:
        seconds, answer = _slow_client(port, 6.0)
        assert seconds < 3.0 and answer.startswith(b"HTTP/1.1 408"), (seconds, answer)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            for _ in range(2):  # keep-alive: the second request's headers are timed afresh
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert sock.recv(1000).startswith(b"HTTP/1.1 200")
                time.sleep(0.6)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB tmpfs (root in CI); skipped where mounting is not allowed (the LATEST test
    above covers the same path everywhere)."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@SQLITE_ONLY
def test_a_disk_full_run_says_so(service_factory: Any, full_disk: Path) -> None:
    svc: Service = service_factory()
    runs = full_disk / "runs"
    svc.serve("--runs", str(runs))
    st = os.statvfs(full_disk)
    with open(full_disk / "filler", "wb") as filler:
        filler.write(b"\0" * (st.f_bavail * st.f_frsize))
    run = svc.wait_status(_create(svc)["id"])
    assert run["status"] in ("FAILED", "INTERRUPTED") and run["passed"] is False, run
    assert "No space left on device" in (run["error"] or ""), run
    assert str(full_disk) not in run["error"]  # the runs folder outside the project: <runs>
    assert run["exitDecision"]["code"] == run["exitCode"] != 0


# --------------------------------------------------------------------------- paths outside


def _machine_paths(text: str) -> list[str]:
    """Absolute paths of this machine in ``text`` (``/tmp/...``, ``/root/...``: a top folder
    that exists here), which no answer, page or download may show."""
    tops = "|".join(sorted(re.escape(p.name) for p in Path("/").iterdir()))
    return re.findall(rf"(?<![\w.~/-])/+(?:{tops})(?:/[^\s'\"<>]*)?(?![\w.-])", text)


def _copy_dataset(svc: Service, name: str, **manifest: str) -> Path:
    folder = svc.root / "golden" / name
    shutil.copytree(svc.root / "golden" / "demo", folder)
    text = (folder / "dataset.yaml").read_text(encoding="utf-8")
    text = text.replace("version: demo-v1", f"version: {name}-v1")
    for key, value in manifest.items():
        text = re.sub(rf"(?m)^{key}:.*$", f"{key}: {value}", text)
    (folder / "dataset.yaml").write_text(text, encoding="utf-8")
    return folder


@SQLITE_ONLY
def test_paths_outside_the_project_are_not_shown_in_answers_pages_or_the_log_bundle(
    service_factory: Any, tmp_path: Path
) -> None:
    """Paths the service's own folders do not cover (a link's target outside the project,
    a missing pack outside it, Python's files in a traceback) used to be shown as they are."""
    svc: Service = service_factory()
    outside = tmp_path / "outside-the-project"
    (outside / "fixtures").mkdir(parents=True)
    _copy_dataset(svc, "farpack", pack="../../../outside-the-project/nopack")
    linked = _copy_dataset(svc, "linked")
    shutil.rmtree(linked / "fixtures")
    (linked / "fixtures").symlink_to(outside / "fixtures")
    svc.serve(workers=1)
    texts: dict[str, str] = {}
    with svc.client("EVAL") as client:
        refused = client.post("/api/eval/runs", json={"dataset": "farpack-v1"})
        assert refused.status_code == 422, refused.text
        assert "nopack" in refused.text  # still names what is wrong
        texts["422 pack outside"] = refused.text
        # A fixture-mode run of recorded answers behind a link out of the dataset is refused
        # before it is queued (it used to fail when pytest collected it), naming the folder.
        linked_refused = client.post("/api/eval/runs", json={"dataset": "linked-v1"})
        assert linked_refused.status_code == 422, linked_refused.text
        assert "fixtures" in linked_refused.json()["detail"], linked_refused.text
        texts["422 fixtures outside"] = linked_refused.text
        (svc.root / "conftest.py").write_text(
            "import json\njson.loads('{not json')\n", encoding="utf-8"
        )
        try:
            crashed = svc.wait_status(_create(svc, idempotencyKey="crash")["id"])
        finally:
            (svc.root / "conftest.py").unlink()
        assert crashed["status"] == "FAILED" and crashed["error"], crashed
        texts["conftest traceback"] = json.dumps(crashed)
        done = svc.wait_status(_create(svc, idempotencyKey="done")["id"])
        assert done["status"] == "COMPLETED", done
        bundle = client.get(f"/api/eval/runs/{done['id']}/artifacts/LOG_BUNDLE")
        assert bundle.status_code == 200, bundle.text
    with zipfile.ZipFile(io.BytesIO(bundle.content)) as logs:
        texts["log bundle"] = "\n".join(
            logs.read(name).decode("utf-8", "replace") for name in logs.namelist()
        )
    assert "goldeval decision: exit 0" in texts["log bundle"]  # the log itself is there
    leaks = {where: _machine_paths(text) for where, text in texts.items()}
    assert all(not found for found in leaks.values()), leaks


@SQLITE_ONLY
def test_every_answer_with_an_exit_code_carries_its_decision(service_factory: Any) -> None:
    """A run's list entry and the replay of an idempotent POST gave ``exitCode`` with
    ``exitDecision: null``: a CI job that retried its POST got a code and no reason."""
    svc: Service = service_factory()
    svc.serve(workers=1)
    first = _create(svc, idempotencyKey="same")
    run = svc.wait_status(first["id"])
    assert run["exitCode"] == 0, run
    with svc.client("EVAL") as client:
        replay = client.post(
            "/api/eval/runs", json={"dataset": "demo-v1", "idempotencyKey": "same"}
        )
        listed = client.get("/api/eval/runs").json()["items"]
    assert replay.status_code == 200 and replay.json()["id"] == first["id"], replay.text
    for answer in (replay.json(), *listed):
        assert answer["exitDecision"] == run["exitDecision"], answer
        assert answer["exitDecision"]["code"] == answer["exitCode"] == 0


#: An operator's conftest.py whose session finish fails after the plugin decided.
LATE_FAILURE = """
def pytest_sessionfinish(session):
    raise RuntimeError("the operator's hook failed after the decision\\n" + "x" * 20000)
"""


@SQLITE_ONLY
def test_a_failure_after_the_decision_is_not_explained_by_the_decision(
    service_factory: Any,
) -> None:
    """pytest exited 1 after the plugin decided 0; the decision line was pushed out of the
    log's tail, and the API said ``error: "every graded attempt ok (no gate)"`` with code 1."""
    svc: Service = service_factory()
    (svc.root / "conftest.py").write_text(LATE_FAILURE, encoding="utf-8")
    svc.serve(workers=1)
    run = svc.wait_status(_create(svc)["id"])
    assert run["exitCode"] != 0 and run["passed"] is False, run
    assert run["exitDecision"]["code"] == run["exitCode"], run
    assert "after goldeval decided exit 0" in run["error"], run
    assert (
        run["error"] in run["exitDecision"]["reason"]
        or run["exitDecision"]["reason"] in (run["error"])
    ), run
