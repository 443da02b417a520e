"""The chat of the web page in a real headless Chromium against a real server: answers render as
sanitised Markdown (code blocks and inline code as elements, never literal backticks; nothing in
an answer becomes markup or script), the evidence lies in the page's own flow (no inner scroll
box), the stage line reads as words, a history answer shows the lines it cites, and a search
snippet opens at the lines that hold the query's words. A screenshot of the answers is saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.liveserver import live_server
from tests.test_history_scope import build_webkit
from tests.test_web import CHROMEDRIVER, CHROMIUM, SHOTS, _wait, browser  # noqa: F401

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHROMIUM and CHROMEDRIVER),
        reason="chromium and chromedriver are not installed "
        "(make test installs them: apt-get install chromium chromium-driver)",
    ),
]

CHECKSUMS = (
    '"""Upload checks."""\n\n\ndef check_upload(upload, limits):\n'
    '    """Check an upload against the limits before it is stored."""\n'
    + "".join(f"    step_{i} = upload.get('part_{i}')\n" for i in range(40))
    + "    digest = upload.compute_digest()\n"
    "    if digest != upload.declared_checksum:\n"
    '        raise ValueError("checksum verification failed")\n'
    "    return True\n"
)
"""A unit whose lines about checksums lie past its first 15 lines."""

HOSTILE = (
    '**bold** and `code` <img src=x onerror="window.__pwned=1"> '
    "[click](javascript:window.__pwned=2) [docs](https://example.com/a)\n\n"
    "```\n<script>window.__pwned=3</script>\n```\n"
    '- <b onmouseover="window.__pwned=4">item</b>\n'
)
"""Markdown with markup and script in every place an answer could carry them."""


def test_answers_render_as_markdown_with_evidence_in_view(
    browser,  # noqa: F811
    tmp_path: Path,
    data_dir: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    root = tmp_path / "webkit"
    shas = build_webkit(root)
    (root / "webkit" / "uploads.py").write_text(CHECKSUMS)
    import subprocess

    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=Fay", "-c", "user.email=fay@example.com",
         "commit", "-qm", "Uploads are checked"],
        check=True,
    )  # fmt: skip
    SHOTS.mkdir(parents=True, exist_ok=True)
    with live_server(data_dir) as base:
        import httpx

        reply = httpx.post(base + "/repos", json={"name": "webkit", "path": str(root)})
        assert reply.status_code == 202, reply.text
        browser.get(base + "/")
        WebDriverWait(browser, 600, poll_frequency=1).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-repo=webkit] [data-status=ready]")
        )
        browser.get(base + "/?repo=webkit")
        _wait(browser, "#repo-select option[value=webkit]")

        # the renderer keeps every tag and script of its input as text
        made = browser.execute_script(
            "const d = document.createElement('div'); document.body.append(d);"
            "renderMarkdown(d, arguments[0]);"
            "for (const e of d.querySelectorAll('b, a')) e.dispatchEvent(new Event('mouseover'));"
            "return {tags: [...d.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()),"
            " hrefs: [...d.querySelectorAll('a')].map((a) => a.getAttribute('href')),"
            " text: d.textContent, pwned: window.__pwned === undefined ? null : window.__pwned};",
            HOSTILE,
        )
        assert made["pwned"] is None, made
        assert not {"img", "script", "b"} & set(made["tags"]), made
        assert {"strong", "code", "pre", "ul", "li"} <= set(made["tags"]), made
        assert made["hrefs"] == ["https://example.com/a"], made
        assert "<img src=x" in made["text"] and "<script>" in made["text"], made
        assert "`" not in made["text"] and "**" not in made["text"], made

        question = browser.find_element(By.ID, "question")
        question.send_keys(
            "What does is_allowed_origin return when the origins include *?",
            Keys.CONTROL,
            Keys.ENTER,
        )
        _wait(browser, ".turn .stage-done", timeout=180)
        answer = browser.find_element(By.CSS_SELECTOR, ".turn .answer")
        html = answer.get_attribute("innerHTML")
        assert "```" not in answer.text and "```" not in html, answer.text
        prose = browser.execute_script(
            "const c = arguments[0].cloneNode(true); c.querySelectorAll('pre').forEach((p) =>"
            " p.remove()); return c.textContent;",
            answer,
        )
        assert "`" not in prose, prose  # inline code is an element, not backticks
        assert answer.find_elements(By.CSS_SELECTOR, "pre .ln"), html  # the quoted evidence
        assert answer.find_elements(By.CSS_SELECTOR, "code"), html
        assert answer.find_elements(By.CSS_SELECTOR, "a.file-link"), html
        stages = browser.find_element(By.CSS_SELECTOR, ".turn .stages").text
        assert "tokens:" not in stages and "Found" in stages and "Answered in" in stages, stages

        # a history answer shows the lines its citations name, below it, in the page's flow
        question.send_keys("Who last changed webkit/middleware/cors.py?", Keys.CONTROL, Keys.ENTER)
        _wait(browser, ".turn .stage-done", timeout=180, count=2)
        turn = browser.find_elements(By.CSS_SELECTOR, ".turn")[-1]
        assert shas["cors"] in turn.find_element(By.CSS_SELECTOR, ".answer").text
        first = _wait(browser, ".turn:last-child .evidence .evidence-item .ln")[0]
        assert first.get_attribute("data-n") == "4", "the line Bob's commit changed"
        assert "Range" in first.text
        done = turn.find_element(By.CSS_SELECTOR, ".stage-done").text
        assert "from the index of commit" in done, done  # which commit the answer comes from
        overflow = browser.execute_script(
            "const t = document.getElementById('turns');"
            "return [getComputedStyle(t).overflowY, t.scrollHeight - t.clientHeight];"
        )
        assert overflow[0] == "visible" and overflow[1] <= 1, overflow
        WebDriverWait(browser, 60).until(
            lambda d: d.execute_script("return !!(state.health.webkit || {}).head_commit")
        )
        assert "HEAD has moved" not in browser.find_element(By.ID, "freshness").text
        browser.set_window_size(1280, 1500)
        browser.execute_script("document.getElementById('chat').scrollIntoView()")
        browser.save_screenshot(str(SHOTS / "desktop-answers.png"))
        browser.set_window_size(1280, 900)

        # a search snippet opens at the lines that hold the query's words, past the unit's head
        browser.find_element(By.ID, "q").send_keys("checksum verification upload", Keys.ENTER)
        _wait(browser, ".hit .code .ln")
        hit = next(
            h
            for h in browser.find_elements(By.CSS_SELECTOR, ".hit")
            if "check_upload" in h.find_element(By.CSS_SELECTOR, ".hit-head").text
        )
        lines = hit.find_elements(By.CSS_SELECTOR, ".code .ln")
        assert len(lines) == 15 and int(lines[0].get_attribute("data-n")) > 4, len(lines)
        marked = hit.find_elements(By.CSS_SELECTOR, ".code .ln.mark")
        assert any("checksum verification failed" in m.text for m in marked), [
            m.text for m in marked
        ]
        assert "all 46 lines" in hit.text  # the whole unit a click away
        assert len(marked) <= 3, [m.text for m in marked]  # the lines with most of its words

        # once HEAD moves past the indexed commit, the page says so above the chat
        (root / "webkit" / "later.py").write_text("def later():\n    return 1\n")
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        subprocess.run(
            ["git", "-C", str(root), "-c", "user.name=Gus", "-c", "user.email=gus@example.com",
             "commit", "-qm", "Later"],
            check=True,
        )  # fmt: skip
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        browser.get(base + "/?repo=webkit")
        WebDriverWait(browser, 60).until(
            lambda d: "HEAD has moved on to" in d.find_element(By.ID, "freshness").text
        )
        assert head[:8] in browser.find_element(By.ID, "freshness").text

        # and each answer says how far, as the server counted it (issue 43)
        question = browser.find_element(By.ID, "question")
        question.send_keys("What does is_allowed_origin return?", Keys.CONTROL, Keys.ENTER)
        done = _wait(browser, ".turn .stage-done", timeout=180)[0].text
        assert "1 commit behind HEAD" in done and head[:8] in done, done
