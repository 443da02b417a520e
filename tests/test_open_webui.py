"""Open WebUI (a real chat front end, PyPI ``open-webui``, in a virtualenv of its own) against a
real ``coderag serve``: a real indexed git repository and API tokens; Open WebUI started offline
on loopback with the settings README's "Chat clients" section shows, and driven in headless
Chromium: the repository is a model in its picker, a question and a follow-up get the cited
answer our /v1 route streams, and the audit log has both chats. A loopback relay between the two
records, byte for byte, what Open WebUI sent.

``make frontend-test`` builds the virtualenv (requirements-open-webui.lock) and runs this test;
without that virtualenv the test is skipped, and ``make test`` leaves it out (marker
``frontend``)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest

from harness.serve import wait_http_ok
from tests.liveserver import ROOT, free_port, live_server, wait_complete
from tests.test_llm_client import (
    ADMIN,
    READER,
    TOKENS,
    lines_of,
    small_repo,  # noqa: F401  (the same repository, as a fixture)
)
from tests.test_web import SHOTS

VENV = Path(os.environ.get("CODERAG_OPEN_WEBUI_VENV") or ROOT / ".cache" / "open-webui-venv")
OPEN_WEBUI = (VENV if VENV.is_absolute() else ROOT / VENV) / "bin" / "open-webui"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
# no apostrophes: Open WebUI's editor types them as typographic quotes
QUESTION = "How does ProcessOrder validate the user id of a request?"
FOLLOW_UP = "What does it return when the user id is 0?"
CITE = re.compile(r"^([^\s:]+):(\d+)-(\d+)$")
"""A ``path:start-end`` citation, as Open WebUI renders our markdown's code spans."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.frontend,
    pytest.mark.skipif(
        not OPEN_WEBUI.exists(),
        reason=f"Open WebUI's virtualenv is absent ({OPEN_WEBUI} missing): "
        "make frontend-test builds it from requirements-open-webui.lock",
    ),
    pytest.mark.skipif(
        not (CHROMIUM and CHROMEDRIVER),
        reason="chromium and chromedriver are not installed (make browser installs them)",
    ),
]


@contextmanager
def relay(target: str) -> Iterator[tuple[str, list[bytes]]]:
    """A loopback TCP relay to ``target`` (http://host:port): yields its own base URL and the
    bytes its clients sent, as they came."""
    host, port = target.removeprefix("http://").split(":")
    sent: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def pipe(src: socket.socket, dst: socket.socket, record: bool) -> None:
        try:
            while data := src.recv(65536):
                if record:
                    sent.append(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((host, int(port)))
            for a, b, record in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=pipe, args=(a, b, record), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", sent
    finally:
        listener.close()


def chat_requests(sent: list[bytes]) -> list[dict]:
    """The JSON bodies of the POST /v1/chat/completions requests in the relayed bytes."""
    stream = b"".join(sent)
    bodies = []
    for head in re.finditer(rb"POST /v1/chat/completions HTTP/1\.1\r\n(.*?)\r\n\r\n", stream, re.S):
        length = int(re.search(rb"(?i)content-length: *(\d+)", head.group(1)).group(1))
        bodies.append(json.loads(stream[head.end() : head.end() + length]))
    return bodies


def readme_settings() -> dict[str, str]:
    """The ``VAR=value`` settings of the ``open-webui serve`` line in README's Chat clients
    section."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Chat clients (OpenAI-compatible)\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^Open WebUI: .*?```sh\n(.*?)```", section, re.M | re.S)
    assert block, "README's Chat clients section has no Open WebUI sh block"
    words = block.group(1).replace("\\\n", " ").replace("<coderag token>", "<token>").split()
    assert words[-2:] == ["open-webui", "serve"], words
    return dict(w.split("=", 1) for w in words[:-2])


@contextmanager
def open_webui(workdir: Path, api_base: str, key: str) -> Iterator[str]:
    """Open WebUI from its own virtualenv on a free loopback port with README's settings (its
    connection: ``api_base``, ``key``), a data folder of its own and no sign-in; yields its
    URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    documented = readme_settings()
    # offline (no update checks, no Hugging Face downloads, no local embedding model: Open
    # WebUI's own document RAG is not used), Ollama off, and no title, tag or follow-up
    # requests to the chat's model, coderag
    assert documented == {
        "OPENAI_API_BASE_URL": "http://<coderag-host>:8000/v1",
        "OPENAI_API_KEY": "<token>",
        "ENABLE_OLLAMA_API": "False",
        "ENABLE_TITLE_GENERATION": "False",
        "ENABLE_TAGS_GENERATION": "False",
        "ENABLE_FOLLOW_UP_GENERATION": "False",
        "OFFLINE_MODE": "True",
        "RAG_EMBEDDING_MODEL": "",
    }, documented
    env = {
        **documented,
        "OPENAI_API_BASE_URL": api_base,
        "OPENAI_API_KEY": key,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "LANG": "C.UTF-8",
        "DATA_DIR": str(workdir / "data"),
        "WEBUI_SECRET_KEY": "test-only-secret",
        "WEBUI_AUTH": "False",  # one user, the admin, signed in without a form
        "HF_HUB_OFFLINE": "1",  # as OFFLINE_MODE sets it, from the start
        "CORS_ALLOW_ORIGIN": url,
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
        "ANONYMIZED_TELEMETRY": "false",
    }
    (workdir / "data").mkdir(parents=True)
    log_path = workdir / "open-webui.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(OPEN_WEBUI), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            tail = lambda: log_path.read_text()[-3000:]  # noqa: E731
            wait_http_ok(proc, url + "/health", tail, 300, "Open WebUI", interval=0.5)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def browser() -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--lang=en-US",
        # loopback only: any other host name fails to resolve
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_window_size(1280, 900)
    yield driver
    driver.quit()


def ask(driver, text: str, answers: int) -> tuple[str, list[str]]:
    """Send ``text`` in Open WebUI's message box; wait for answer number ``answers`` to list its
    sources; its text and the ``path:start-end`` citations rendered under **Sources**."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    box = driver.find_element(By.ID, "chat-input")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)

    def sourced(d):
        found = d.find_elements(By.ID, "response-content-container")
        return len(found) >= answers and "Sources" in found[answers - 1].text and found

    answer = WebDriverWait(driver, 180).until(sourced)[answers - 1]
    sources = answer.find_elements(By.CSS_SELECTOR, "li code")
    return answer.text, [c.text for c in sources if CITE.match(c.text)]


def test_open_webui_chat(
    browser,
    small_repo: Path,  # noqa: F811  (the fixture imported above)
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    SHOTS.mkdir(parents=True, exist_ok=True)
    go = (small_repo / "src/go/sample.go").read_text()
    process_order = lines_of(go, "func (s *Service) ProcessOrder(", "}")
    figures: dict[str, float] = {}
    with (
        live_server(data_dir, CODERAG_API_TOKENS=TOKENS) as base,
        httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120
        ) as admin,
    ):
        r = admin.post("/repos", json={"name": "orders", "path": str(small_repo)})
        assert r.status_code == 202, r.text
        assert wait_complete(admin, "orders", timeout=1200)["status"] == "ready"

        # What our route answers this question, asked directly (the extractive backend answers
        # the same question the same way): the citations Open WebUI must show.
        direct = admin.post(
            "/v1/chat/completions",
            json={"model": "coderag/orders", "messages": [{"role": "user", "content": QUESTION}]},
        ).json()
        expected = [
            f"{c['file']}:{c['start_line']}-{c['end_line']}" for c in direct["coderag"]["citations"]
        ]
        assert expected and expected[0].startswith("src/go/sample.go:"), direct

        t0 = time.perf_counter()
        with (
            relay(base) as (relayed, sent),
            open_webui(tmp_path / "open-webui", f"{relayed}/v1", READER) as webui,
        ):
            figures["open_webui_start_s"] = time.perf_counter() - t0
            browser.get(webui + "/")
            WebDriverWait(browser, 120).until(
                lambda d: d.find_elements(By.ID, "model-selector-model-button")
            )
            # the release notes Open WebUI shows a new user once
            for button in browser.find_elements(By.TAG_NAME, "button"):
                if button.text.strip() == "Okay, Let's Go!":
                    button.click()

            # The model picker lists the repository (and nothing else: Ollama is off).
            browser.find_element(By.ID, "model-selector-model-button").click()
            browser.find_element(By.ID, "model-search-input").send_keys("orders")
            options = WebDriverWait(browser, 30).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, "[role=option][data-value]")
            )
            assert [o.get_attribute("data-value") for o in options] == ["coderag/orders"]
            options[0].click()
            picked = browser.find_element(By.ID, "model-selector-model-button")
            assert picked.text.strip() == "coderag/orders"

            t1 = time.perf_counter()
            first, cited = ask(browser, QUESTION, 1)
            figures["first_answer_s"] = time.perf_counter() - t1
            browser.save_screenshot(str(SHOTS / "open-webui-chat.png"))
            assert cited == expected, first
            path, start, end = CITE.match(cited[0]).groups()
            assert path == "src/go/sample.go", first
            assert process_order[0] - 1 <= int(start) <= int(end) <= process_order[1], cited

            # A follow-up in the same chat: Open WebUI sends the earlier turns, and "it" is
            # found through them.
            follow, cited = ask(browser, FOLLOW_UP, 2)
            assert cited and cited[0].startswith("src/go/sample.go:"), follow
            browser.save_screenshot(str(SHOTS / "open-webui-follow-up.png"))

        # What Open WebUI sent: two streamed chats for coderag/orders, the second carrying
        # the first question and the answer our route gave it.
        chats = chat_requests(sent)
        assert [c["model"] for c in chats] == ["coderag/orders"] * 2, chats
        assert all(c.get("stream") is True for c in chats)
        turns = [[(m["role"], m["content"]) for m in c["messages"]] for c in chats]
        assert turns[0] == [("user", QUESTION)], turns
        assert [t[0] for t in turns[1]] == ["user", "assistant", "user"], turns
        assert turns[1][0][1] == QUESTION and turns[1][2][1] == FOLLOW_UP
        assert all(c in turns[1][1][1] for c in expected), turns[1][1][1]

        # The audit log: bob's (the reader token Open WebUI holds) two chats, both answered,
        # the follow-up's retrieval led by the Go file; the direct question was ada's.
        export = admin.get("/audit/export.csv").text
        rows = [r for r in csv.DictReader(io.StringIO(export)) if r["endpoint"] == "chat"]
        assert [(r["user"], r["repo"], r["query"], r["status"]) for r in rows] == [
            ("ada", "orders", QUESTION, "ok"),
            ("bob", "orders", QUESTION, "ok"),
            ("bob", "orders", FOLLOW_UP, "ok"),
        ]
        assert json.loads(rows[2]["retrieved_files"])[0] == "src/go/sample.go"

    with capsys.disabled():
        print("\nOpen WebUI figures:", json.dumps({k: round(v, 1) for k, v in figures.items()}))
