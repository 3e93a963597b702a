"""The playground in a real browser facing a hostile block: every place
the page puts what a run controls (stdout, stderr, an error's name and
value and traceback in a Jupyter session, file names in the file list and under a figure, an
SVG image, an HTML display) gets markup that would run script if it were
taken as HTML. Judged in the page: no script ran (the title, no dialog, no
element the markup would make), and the text is shown as text."""

from __future__ import annotations

import time

from playwright.sync_api import expect

from tests.playground.test_playground import LATEST, finished, run_code

# what a script would do: retitle the page, or the parent page from a frame
XSS = """<img src=x onerror="document.title='pwned';alert(1)">"""
FRAME_XSS = (
    "<script>parent.document.title='pwned'</script>"
    """<img src=x onerror="parent.document.title='pwned'"><b>shown</b>"""
)
SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" onload="document.title=\'pwned\'">'
    "<script>document.title='pwned'</script><rect width='40' height='40'/></svg>"
)

BLOCK = f"""
import sys
X = {XSS!r}
print(X)
print(X, file=sys.stderr)
open(X + '.txt', 'w').write('named with markup')
open(X + '.svg', 'w').write({SVG!r})
open('plain.svg', 'w').write({SVG!r})
raise type(X, (Exception,), {{}})(X)
"""


def _watched(page) -> list[str]:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    return dialogs


def _nothing_ran(page, dialogs: list[str]) -> None:
    time.sleep(0.5)  # what a script would have done, given the time to do it
    assert page.title() != "pwned"
    assert not dialogs, dialogs
    assert page.locator("img[src='x']").count() == 0, "run output became markup in the page"


def test_hostile_output_names_and_errors_are_shown_as_text(page):
    dialogs = _watched(page)
    run_code(page, BLOCK)
    run = finished(page)
    expect(run.locator(".out .stdout")).to_have_text(XSS + "\n")
    expect(run.locator(".out .stderr")).to_contain_text(XSS)
    expect(page.locator("#files")).to_contain_text(XSS + ".txt")
    expect(run.locator("figcaption", has_text=XSS + ".svg")).to_have_count(1)
    expect(run.locator("figure img")).to_have_count(2)  # the SVGs, as images: an <img> runs no script
    _nothing_ran(page, dialogs)


def test_a_jupyter_html_display_runs_no_script_in_the_page(page):
    dialogs = _watched(page)
    page.select_option("#backend", "jupyter")
    expect(page.locator("#session")).to_contain_text("on jupyter (stateful", timeout=60_000)
    run_code(
        page,
        f"from IPython.display import HTML, SVG, display\ndisplay(HTML({FRAME_XSS!r}))\n"
        f"display(SVG({SVG!r}))",
    )
    run = finished(page, timeout=60_000)
    expect(run).to_have_attribute("data-status", "completed")
    frame = run.locator("iframe.html")
    expect(frame).to_have_attribute("sandbox", "")  # no script, no same origin
    expect(frame.content_frame.locator("b")).to_have_text("shown")
    expect(page.locator(LATEST).locator("img")).not_to_have_count(0)
    run_code(page, f"X = {XSS!r}\nraise type(X, (Exception,), {{}})(X)")  # the kernel's error: name and value
    error = finished(page, timeout=60_000).get_by_role("group", name="Error")
    expect(error.locator("strong")).to_contain_text(XSS + ": " + XSS)
    expect(error.locator("pre")).to_contain_text(XSS)
    _nothing_ran(page, dialogs)
