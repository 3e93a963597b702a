"""The playground in a real browser (Chromium through playwright) on a
real ``execbox serve``: type and run, output streamed before a slow block
ends, a plot as an image, Stop, upload then read, a model reply's blocks,
a Jupyter session's state and its reset, an error's traceback, a token,
a phone's width. The screenshots of docs/playground/ come from here."""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from tests.server._http import running_server

LATEST = ".run >> nth=0"  # the newest run is on top


def run_code(page, code: str, *, language: str = "python") -> None:
    page.select_option("#language", language)
    page.fill("#code", code)
    page.get_by_role("button", name="Run", exact=True).click()


def finished(page, timeout: float = 30_000):
    run = page.locator(LATEST)
    expect(run).to_have_attribute("data-status", re.compile("."), timeout=timeout)
    return run


def test_type_code_and_run_with_ctrl_enter(page, shot):
    page.locator("#code").click()
    page.keyboard.type("print('hello from the model')")
    page.keyboard.press("Control+Enter")
    run = finished(page)
    expect(run).to_have_attribute("data-status", "completed")
    expect(run.locator(".out")).to_have_text("hello from the model\n")
    expect(run.locator("h4")).to_contain_text(re.compile(r"python · exit 0 · [\d.]+ s"))
    expect(page.locator("#status")).to_have_text("done (exit 0)")
    shot(page, "ran")


def test_output_appears_before_a_slow_block_ends(page, shot):
    run_code(
        page,
        "import sys, time\nprint('first', flush=True)\nprint('warning', file=sys.stderr, flush=True)\n"
        "time.sleep(3)\nprint('second')",
    )
    started = time.monotonic()
    out = page.locator(LATEST).locator(".out")
    expect(out).to_contain_text("first")
    expect(out.locator(".stderr")).to_have_text("warning\n")
    assert time.monotonic() - started < 2.5, "the first line waited for the block's end"
    expect(page.locator(LATEST)).not_to_have_attribute("data-status", re.compile("."))  # still running
    shot(page, "streaming")
    finished(page)
    expect(out).to_have_text("first\nwarning\nsecond\n")


def test_a_matplotlib_plot_shows_as_an_image(page, shot):
    run_code(
        page,
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 3, 2, 4])\nplt.title('from the model')\nplt.savefig('plot.png')\nprint('saved')",
    )
    run = finished(page)
    image = run.locator("img.plot")
    expect(image).to_have_count(1)
    expect(run.locator("figcaption")).to_have_text("plot.png")
    assert image.evaluate("img => img.complete && img.naturalWidth") > 100
    expect(page.locator("#files")).to_contain_text("plot.png")
    shot(page, "plot")


def test_stop_kills_a_loop(page):
    run_code(
        page, "import time\ni = 0\nwhile True:\n    print(i, flush=True)\n    i += 1\n    time.sleep(0.05)"
    )
    expect(page.locator(LATEST).locator(".out")).to_contain_text("3")
    page.get_by_role("button", name="Stop").click()
    run = finished(page, timeout=15_000)
    expect(run).to_have_attribute("data-status", "cancelled")
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()
    run_code(page, "print('after the stop')")  # the session is free again
    expect(finished(page).locator(".out")).to_have_text("after the stop\n")


def test_upload_then_read_it_from_code(page, tmp_path, shot):
    given = tmp_path / "numbers.txt"
    given.write_text("21")
    page.set_input_files("#upload", str(given))
    expect(page.locator("#files")).to_contain_text("numbers.txt")
    run_code(page, "print(int(open('numbers.txt').read()) * 2)")
    expect(finished(page).locator(".out")).to_have_text("42\n")
    shot(page, "files")


def test_an_error_shows_its_traceback(page, shot):
    run_code(page, "def f():\n    return 1 / 0\n\nf()")
    run = finished(page)
    error = run.get_by_role("group", name="Error")
    expect(error.locator("strong")).to_have_text("ZeroDivisionError: division by zero")
    expect(error.locator("pre")).to_contain_text("Traceback (most recent call last)")
    expect(error.locator("pre")).to_contain_text("return 1 / 0")
    expect(run.locator("h4")).to_contain_text("exit 1")
    shot(page, "error")


def test_a_model_reply_runs_its_fenced_blocks(page):
    reply = (
        "Sure, here is the code:\n\n```python\nprint(6 * 7)\n```\n\nThen in the shell:\n\n"
        "```sh\necho from the shell >&2\n```\n"
    )
    page.select_option("#language", "reply")
    page.fill("#code", reply)
    expect(page.get_by_role("list", name="Blocks found in the reply").locator("li")).to_have_count(2)
    page.keyboard.press("Control+Enter")
    run = finished(page)
    expect(run.locator(".block")).to_have_count(2)
    expect(run.locator(".block").nth(0).locator(".out")).to_have_text("42\n")
    expect(run.locator(".block").nth(1).locator(".stderr")).to_have_text("from the shell\n")
    expect(run.locator(".block").nth(1).locator("h4")).to_contain_text("sh · exit 0")


def test_a_jupyter_session_keeps_state_every_display_inline_and_reset_clears_it(page, shot):
    page.select_option("#backend", "jupyter")
    expect(page.locator("#session")).to_contain_text("on jupyter (stateful", timeout=60_000)
    run_code(
        page,
        "x = 41\nimport matplotlib.pyplot as plt\n"
        "for n in (1, 2):\n    plt.figure()\n    plt.plot(range(n + 2))\n    plt.show()\n"
        "from IPython.display import HTML, display\ndisplay(HTML('<b>bold</b> from the kernel'))",
    )
    run = finished(page, timeout=60_000)
    expect(run).to_have_attribute("data-status", "completed")
    expect(run.locator("img.plot")).to_have_count(2)  # every display, not only the first
    html = run.locator("iframe.html")
    expect(html).to_have_attribute("sandbox", "")
    expect(html.content_frame.locator("b")).to_have_text("bold")
    run_code(page, "print(x + 1)")
    expect(finished(page).locator(".out")).to_have_text("42\n")
    shot(page, "jupyter")
    page.get_by_role("button", name="Reset session").click()
    expect(page.locator("#status")).to_contain_text("session reset", timeout=60_000)
    run_code(page, "print(x)")
    error = finished(page, timeout=60_000).get_by_role("group", name="Error")
    expect(error.locator("strong")).to_contain_text("NameError")


def test_controls_have_accessible_names_and_fit_a_phone(browser, server, shot):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        page.goto(server.page_url)
        expect(page.locator("#session")).to_contain_text("Session s_")
        for role, name in [
            ("button", "Run"),
            ("button", "Stop"),
            ("button", "New session"),
            ("button", "Reset session"),
            ("button", "Refresh"),
            ("combobox", "Backend"),
            ("combobox", "Language"),
            ("spinbutton", "Timeout (s)"),
            ("spinbutton", "Memory (MB)"),
            ("checkbox", "Network"),
            ("textbox", "Code or model reply"),
        ]:
            expect(page.get_by_role(role, name=name, exact=True)).to_have_count(1)
        expect(page.get_by_label("Upload a file")).to_have_count(1)
        run_code(page, "print('on a phone')")
        expect(finished(page).locator(".out")).to_have_text("on a phone\n")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        shot(page, "phone")
    finally:
        context.close()


def test_a_token_is_asked_for_and_sent(browser):
    with running_server("--backend", "local", token="s3cret") as guarded:
        context = browser.new_context()
        page = context.new_page()
        try:
            page.goto(guarded.url + "/")  # the page itself needs no token
            expect(page.get_by_label("Bearer token")).to_be_visible()
            page.get_by_label("Bearer token").fill("s3cret")
            page.get_by_role("button", name="Connect").click()
            expect(page.locator("#session")).to_contain_text("Session s_")
            run_code(page, "print('with a token')")
            expect(finished(page).locator(".out")).to_have_text("with a token\n")
        finally:
            context.close()


def test_the_printed_link_opens_a_working_page_and_leaves_the_address_bar(browser):
    """``execbox serve`` with no token makes one and prints the page's link
    with it: the page keeps it for the tab, takes it out of the address bar,
    and sends it and its session's key with every call (uploads, files too)."""
    with running_server("--backend", "local", token="") as made:
        context = browser.new_context()
        page = context.new_page()
        sent: list[dict[str, str]] = []
        page.on("request", lambda request: sent.append(request.headers) if "/files/" in request.url else None)
        try:
            page.goto(made.link)
            expect(page.locator("#session")).to_contain_text("Session s_")
            assert "token" not in page.url and page.url == made.url + "/"
            assert page.evaluate("sessionStorage.getItem('execbox-token')") == made.token
            expect(page.get_by_label("Bearer token")).to_be_hidden()
            run_code(page, "open('made.txt', 'w').write('from the link')\nprint('from the link')")
            expect(finished(page).locator(".out")).to_have_text("from the link\n")
            expect(page.locator("#files")).to_contain_text("made.txt")
            with page.expect_download() as download:
                page.get_by_role("button", name="Download made.txt").click()
            assert open(download.value.path()).read() == "from the link"
            assert sent and all(h.get("x-execbox-session-key", "").startswith("sk_") for h in sent)
        finally:
            context.close()


def test_execbox_playground_opens_the_browser_on_a_private_file_not_on_the_token(browser):
    """The browser is started with a file's path (its command line is every
    local user's to read), a file only this user may read, which leads on
    to the link with the token."""
    import os
    import stat

    from execbox.cli._playground import _redirect_file

    with running_server("--backend", "local", token="") as made:
        opened = _redirect_file(made.link)
        assert made.token not in opened and opened.startswith("file:///")
        assert stat.S_IMODE(os.stat(opened[7:]).st_mode) == 0o600
        context = browser.new_context()
        page = context.new_page()
        try:
            page.goto(opened)
            expect(page.locator("#session")).to_contain_text("Session s_")
            assert page.url == made.url + "/"
        finally:
            context.close()
