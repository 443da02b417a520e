"""The web page in a real headless Chromium against a real uvicorn on loopback: register a real
git repository, wait for ready, search, open a result, ask, open a citation, in two widths."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import git
import httpx
import pytest

from tests.conftest import commit_all
from tests.liveserver import live_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
)
FIRST_HIT = "src/go/sample.go:10-16"
"""The best unit for the test's query, as tests/test_api.py pins it."""
SHOTS = Path(
    os.environ.get("CODERAG_SCREENSHOTS") or Path(tempfile.gettempdir()) / "coderag-screenshots"
)
"""Where the screenshots go: `make screenshots` points this at the README's docs/screenshots."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHROMIUM and CHROMEDRIVER),
        reason="chromium and chromedriver are not installed "
        "(make test installs them: apt-get install chromium chromium-driver)",
    ),
]


@pytest.fixture
def browser() -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--lang=en-US"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_window_size(1280, 900)
    yield driver
    driver.quit()


def _wait(driver, css: str, timeout: float = 60, count: int = 1) -> list:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(
        lambda d: (found := d.find_elements(By.CSS_SELECTOR, css)) and len(found) >= count and found
    )


def _no_horizontal_scroll(driver) -> bool:
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth + 1"
    )


def test_register_search_open_ask_cite(
    browser, sample_repo: Path, data_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    SHOTS.mkdir(parents=True, exist_ok=True)
    figures: dict[str, float] = {}
    with live_server(data_dir) as base:
        t0 = time.perf_counter()
        browser.get(base + "/")
        _wait(browser, "#repo-rows tr")
        figures["page_load_ms"] = browser.execute_script(
            "const n = performance.getEntriesByType('navigation')[0];"
            "return n.loadEventEnd - n.startTime;"
        )
        assert "No repository yet" in browser.find_element(By.ID, "repo-rows").text

        form = browser.find_element(By.ID, "register")
        form.find_element(By.NAME, "name").send_keys("sample")
        form.find_element(By.NAME, "source").send_keys(str(sample_repo), Keys.ENTER)
        WebDriverWait(browser, 600, poll_frequency=1).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-repo=sample] [data-status=ready]")
        )
        row = browser.find_element(By.CSS_SELECTOR, "tr[data-repo=sample]").text
        assert "ready" in row
        assert browser.find_element(By.ID, "repo-select").get_attribute("value") == "sample"
        browser.find_element(By.CSS_SELECTOR, "tr[data-repo=sample] .skipped").click()
        WebDriverWait(browser, 60).until(
            lambda d: "binary 1" in d.find_element(By.ID, "repo-msg").text
        )
        assert "not_utf8 1" in browser.find_element(By.ID, "repo-msg").text

        query = "process an order and validate the user id"
        t1 = time.perf_counter()
        browser.find_element(By.ID, "q").send_keys(query, Keys.ENTER)
        hits = _wait(browser, ".hit .code .ln")
        figures["first_result_ms"] = (time.perf_counter() - t1) * 1000
        first = browser.find_element(By.CSS_SELECTOR, ".hit .file-link")
        assert first.text == FIRST_HIT
        assert hits[0].get_attribute("data-n") == "10"
        assert browser.find_elements(By.CSS_SELECTOR, ".hit .code .kw")  # highlighted
        head = browser.find_element(By.CSS_SELECTOR, ".hit .hit-head").text
        assert "(*Service).ProcessOrder" in head and "method" in head and "go" in head
        assert "Ada" in head  # the last author of those lines
        url = urlparse(browser.current_url)
        assert parse_qs(url.query) == {"repo": ["sample"], "q": [query]}
        browser.save_screenshot(str(SHOTS / "desktop-search.png"))

        first.click()
        _wait(browser, "#file-view[open] .ln.mark", count=7)
        marked = browser.find_elements(By.CSS_SELECTOR, "#file-code .ln.mark")
        assert [m.get_attribute("data-n") for m in marked] == [str(n) for n in range(10, 17)]
        assert "func (s *Service) ProcessOrder" in marked[1].text
        editor = browser.find_element(By.ID, "file-editor").get_attribute("href")
        assert editor == f"vscode://file{sample_repo.resolve()}/src/go/sample.go:10"
        browser.save_screenshot(str(SHOTS / "desktop-file.png"))
        browser.find_element(By.ID, "file-code").send_keys(Keys.ESCAPE)
        WebDriverWait(browser, 10).until(
            lambda d: not d.find_element(By.ID, "file-view").get_attribute("open")
        )

        # The shared link shows the same results in a fresh page.
        shared = base + "/?" + url.query
        browser.get(shared)
        _wait(browser, ".hit .file-link")
        assert browser.find_element(By.CSS_SELECTOR, ".hit .file-link").text == FIRST_HIT

        question = browser.find_element(By.ID, "question")
        question.send_keys("How is an order created?", Keys.CONTROL, Keys.ENTER)
        _wait(browser, ".turn .stage-done", timeout=120)
        stages = [
            e.get_attribute("class") for e in browser.find_elements(By.CSS_SELECTOR, ".stages > li")
        ]
        assert stages[:2] == ["stage-retrieval", "stage-prompt"] and stages[-1] == "stage-done"
        words = browser.find_element(By.CSS_SELECTOR, ".turn .stages").text
        assert "tokens:" not in words and "Answered in" in words, words
        assert browser.find_elements(By.CSS_SELECTOR, ".stage-retrieval ol li .file-link")
        citations = browser.find_elements(By.CSS_SELECTOR, ".turn .answer .file-link")
        assert citations, browser.find_element(By.CSS_SELECTOR, ".turn .answer").text
        assert browser.find_elements(By.CSS_SELECTOR, ".turn .answer .editor-link")
        file, start, end = (
            citations[0].get_attribute(a) for a in ("data-file", "data-start", "data-end")
        )

        question.send_keys("and where is it validated?", Keys.CONTROL, Keys.ENTER)
        _wait(browser, ".turn .stage-done", timeout=120, count=2)
        browser.save_screenshot(str(SHOTS / "desktop-chat.png"))

        browser.find_element(By.CSS_SELECTOR, ".turn .answer .file-link").click()
        _wait(browser, "#file-view[open] .ln.mark")
        marked = browser.find_elements(By.CSS_SELECTOR, "#file-code .ln.mark")
        assert (
            marked[0].get_attribute("data-n") == start and marked[-1].get_attribute("data-n") == end
        )
        assert file in browser.find_element(By.ID, "file-title").text
        browser.find_element(By.ID, "file-close").click()

        browser.find_element(By.ID, "lang").click()
        assert browser.find_element(By.ID, "search-h").text == "搜索"
        browser.find_element(By.ID, "lang").click()

        browser.set_window_size(375, 812)
        browser.get(shared)
        _wait(browser, ".hit .file-link")
        assert _no_horizontal_scroll(browser)
        browser.save_screenshot(str(SHOTS / "narrow-search.png"))
        browser.execute_script("document.getElementById('chat').scrollIntoView()")
        browser.find_element(By.ID, "question").send_keys(
            "订单是怎么创建的？", Keys.CONTROL, Keys.ENTER
        )
        _wait(browser, ".turn .stage-done", timeout=120)
        assert _no_horizontal_scroll(browser)
        browser.save_screenshot(str(SHOTS / "narrow-chat.png"))
        figures["whole_flow_s"] = time.perf_counter() - t0

    with capsys.disabled():
        print("\nweb page figures:", json.dumps({k: round(v, 1) for k, v in figures.items()}))


LEDGER = '''"""Books of the shop."""


def post_payment(book, amount):
    """Record a payment in the book."""
    book.append(amount)
    return book
'''
FEATURE_ONLY = '''

def reconcile_ledger_entries(entries):
    """Match every debit with its credit before the books close."""
    matched = [e for e in entries if e.get("matched")]
    return matched
'''


def _search_in_page(driver, query: str) -> list[str]:
    """Submit ``query`` in the search box; the symbols of the hits once the answer is shown."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script("document.getElementById('search-msg').textContent = ''")
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(query, Keys.ENTER)
    WebDriverWait(driver, 60).until(
        lambda d: d.find_element(By.ID, "search-msg").text not in ("", "…")
    )
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".hit .symbol")]


def test_ref_picker_searches_and_opens_a_branch(browser, tmp_path: Path, data_dir: Path) -> None:
    """A branch indexed as a ref: picked beside the repository, it is what search and the file
    view read (and the URL keeps it); the repository's own branch does not hold its function."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    root = tmp_path / "books"
    (root / "books").mkdir(parents=True)
    (root / "books" / "ledger.py").write_text(LEDGER)
    repo = git.Repo.init(root, initial_branch="main")
    commit_all(repo, "main")
    repo.git.checkout("-b", "feature")
    (root / "books" / "ledger.py").write_text(LEDGER + FEATURE_ONLY)
    commit_all(repo, "feature")
    repo.git.checkout("main")
    query, wanted = "reconcile ledger entries", "reconcile_ledger_entries"

    with live_server(data_dir) as base:
        resp = httpx.post(base + "/repos", json={"name": "books", "path": str(root)})
        assert resp.status_code == 202, resp.text
        deadline = time.monotonic() + 600
        while not (body := httpx.get(base + "/repos/books").json())["complete"]:
            assert body["status"] != "error" and time.monotonic() < deadline, body
            time.sleep(0.5)
        resp = httpx.post(base + "/repos/books/refs", json={"ref": "feature"})
        assert resp.status_code == 202, resp.text

        browser.get(base + "/?repo=books")
        # the picker follows the ref's indexing until it is ready
        WebDriverWait(browser, 600, poll_frequency=1).until(
            lambda d: d.find_elements(
                By.CSS_SELECTOR, "#ref-select option[value=feature][data-status=ready]"
            )
        )
        assert "feature" in browser.find_element(By.CSS_SELECTOR, "tr[data-repo=books] .refs").text
        picker = Select(browser.find_element(By.ID, "ref-select"))
        assert picker.first_selected_option.get_attribute("value") == ""
        assert picker.first_selected_option.text == "default branch"

        picker.select_by_value("feature")
        assert wanted in _search_in_page(browser, query)
        assert parse_qs(urlparse(browser.current_url).query) == {
            "repo": ["books"],
            "ref": ["feature"],
            "q": [query],
        }
        hit = next(
            h
            for h in browser.find_elements(By.CSS_SELECTOR, ".hit")
            if h.find_element(By.CSS_SELECTOR, ".symbol").text == wanted
        )
        # the snippet is read at the ref (the default branch has no such lines)
        WebDriverWait(browser, 30).until(lambda d: "def reconcile_ledger_entries" in hit.text)

        hit.find_element(By.CSS_SELECTOR, ".file-link").click()
        _wait(browser, "#file-view[open] .ln.mark")
        marked = browser.find_elements(By.CSS_SELECTOR, "#file-code .ln.mark")
        assert "def reconcile_ledger_entries" in marked[0].text
        assert "books@feature: books/ledger.py" in browser.find_element(By.ID, "file-title").text
        opened = browser.current_url
        assert parse_qs(urlparse(opened).query)["ref"] == ["feature"]

        # the shared link opens the same file at the same ref in a fresh page
        browser.get(opened)
        _wait(browser, "#file-view[open] .ln.mark")
        assert "def reconcile_ledger_entries" in browser.find_element(By.ID, "file-code").text
        picker = Select(browser.find_element(By.ID, "ref-select"))
        assert picker.first_selected_option.get_attribute("value") == "feature"
        browser.find_element(By.ID, "file-close").click()

        # asked at the ref, the answer cites the function and its citation opens at the ref
        browser.find_element(By.ID, "question").send_keys(
            "where are ledger entries reconciled?", Keys.CONTROL, Keys.ENTER
        )
        _wait(browser, ".turn .stage-done", timeout=120)
        found = browser.find_element(By.CSS_SELECTOR, ".stage-retrieval ol")
        assert wanted in found.get_attribute("textContent")  # folded under "the best 5"
        cited = browser.find_elements(By.CSS_SELECTOR, ".turn .answer .file-link")
        assert cited, browser.find_element(By.CSS_SELECTOR, ".turn .answer").text
        assert parse_qs(urlparse(cited[0].get_attribute("href")).query)["ref"] == ["feature"]
        cited[0].click()
        _wait(browser, "#file-view[open] .ln.mark")
        assert "books@feature" in browser.find_element(By.ID, "file-title").text
        marked = browser.find_elements(By.CSS_SELECTOR, "#file-code .ln.mark")
        assert any("def reconcile_ledger_entries" in m.text for m in marked)
        browser.find_element(By.ID, "file-close").click()

        # back on the repository's own branch the function is not there
        picker.select_by_value("")
        assert wanted not in _search_in_page(browser, query)
        assert "ref" not in parse_qs(urlparse(browser.current_url).query)
