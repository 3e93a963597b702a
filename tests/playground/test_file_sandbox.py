"""A file a block writes is the block's page, never the API's: opened in a
real browser (Chromium through playwright) at its URL on the server, its
script must not run (before: an ``x.html`` or ``x.svg`` was served as a
page of the API's origin, and its script could call the API)."""

from __future__ import annotations

import time

import pytest

from tests.server._http import KEY_HEADER, open_session

PAGE = """<html><body><script>
document.title = 'ran';
fetch('/v1/sessions/SID/files/ran.txt', {method: 'PUT', body: 'ran'});
</script></body></html>"""

SVG = """<svg xmlns="http://www.w3.org/2000/svg"><script>
document.title = 'ran';
fetch('/v1/sessions/SID/files/ran.txt', {method: 'PUT', body: 'ran'});
</script></svg>"""


@pytest.mark.parametrize("name, text", [("x.html", PAGE), ("x.svg", SVG)])
def test_opening_a_block_written_file_runs_no_script(browser, server, name, text):
    with server.client() as client:
        sid = open_session(client)["id"]
        code = f"open({name!r}, 'w').write({text.replace('SID', sid)!r})"
        ran = client.post(f"/v1/sessions/{sid}/executions", json={"code": code})
        assert ran.status_code == 200 and ran.json()["status"] == "completed", ran.text
        # a browser that sends the token and the session's key with every request (so that the script,
        # were it run, could use the API): only the file's own headers keep it from running
        sent = {"Authorization": f"Bearer {server.token}", KEY_HEADER: server.keys[sid]}
        context = browser.new_context(accept_downloads=True, extra_http_headers=sent)
        try:
            page = context.new_page()
            url = f"{server.url}/v1/sessions/{sid}/files/{name}"
            try:
                with page.expect_download(timeout=10_000) as download:
                    page.evaluate("url => { location.href = url }", url)
                assert download.value.suggested_filename == name  # saved, not shown
            finally:
                time.sleep(0.5)  # what a script would have done, given the time to do it
                assert page.title() != "ran"
        finally:
            context.close()
        assert client.get(f"/v1/sessions/{sid}/files/ran.txt").status_code == 404
        assert client.get(f"/v1/sessions/{sid}/files/{name}").text == text.replace("SID", sid)
