"""Paper catalogs: the Remyx API (through a fake server), local files, chains,
and the ``execbox papers`` command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fake_remyx import FakeRemyx

from execbox import ConfigurationError, ExecboxError
from execbox.papers import (
    Catalog,
    CatalogError,
    ChainedCatalog,
    LocalCatalog,
    PaperAsset,
    PaperNotFoundError,
    RemyxCatalog,
    default_catalog,
)

VIT = {
    "arxiv_id": "2010.11929v2",
    "title": "An Image is Worth 16x16 Words: Transformers for Image Recognition",
    "abstract": "We apply a pure transformer to sequences of image patches.",
    "authors": ["Alexey Dosovitskiy", "Lucas Beyer"],
    "categories": ["cs.CV", "cs.LG"],
    "url": "https://arxiv.org/abs/2010.11929v2",
    "published_at": "2020-10-22T00:00:00",
    "github_url": "https://github.com/google-research/vision_transformer",
    "docker_image": "remyxai/2010.11929v2:latest",
    "has_docker": True,
    "working_directory": "/app/vit",
    "environment_vars": ["HF_TOKEN"],
    "docker_build_status": "success",
    "reasoning": "Small and self-contained.",
    "quickstart_hint": "python -m vit.train --help",
    "dockerfile_s3_uri": "s3://remyx/dockerfiles/2010.11929v2",
    "dockerfile_text": "FROM python:3.11\nRUN pip install jax\n",
}
BERT = {
    "arxiv_id": "1810.04805",
    "title": "BERT: Pre-training of Deep Bidirectional Transformers",
    "abstract": "Language representation with transformers.",
    "authors": ["Jacob Devlin"],
    "categories": ["cs.CL"],
    "has_docker": False,
}
RESNET = {
    "arxiv_id": "1512.03385",
    "title": "Deep Residual Learning for Image Recognition",
    "abstract": "Residual networks.",
    "categories": ["cs.CV"],
    "docker_image": "remyxai/1512.03385:latest",
}
ASSETS = [VIT, BERT, RESNET]


@pytest.fixture
def remyx(monkeypatch):
    monkeypatch.delenv("REMYXAI_API_KEY", raising=False)
    monkeypatch.delenv("REMYXAI_API_URL", raising=False)
    with FakeRemyx(ASSETS) as fake:
        yield fake


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- RemyxCatalog against the fake API -----------------------------------------


def test_get_returns_every_field(remyx):
    paper = RemyxCatalog("test-key", base_url=remyx.base_url).get("2010.11929v2")
    assert paper == PaperAsset.from_dict(VIT)
    assert paper.working_directory == "/app/vit"
    assert paper.environment_vars == ("HF_TOKEN",)
    assert paper.dockerfile_text.startswith("FROM python:3.11")
    assert remyx.requests[-1].method == "GET"
    assert remyx.requests[-1].path == "/search/assets/2010.11929v2"


def test_search_sends_the_documented_body(remyx):
    catalog = RemyxCatalog("test-key", base_url=remyx.base_url)
    found = catalog.search("image recognition", max_results=5, has_docker=True, categories=["cs.CV"])
    assert [p.arxiv_id for p in found] == ["2010.11929v2", "1512.03385"]
    assert remyx.requests[-1].method == "POST"
    assert remyx.requests[-1].body == {
        "query": "image recognition",
        "max_results": 5,
        "use_llm": False,
        "has_docker": True,
        "categories": ["cs.CV"],
    }
    catalog.search("transformers", use_llm=True)
    assert remyx.requests[-1].body == {"query": "transformers", "max_results": 10, "use_llm": True}


def test_search_over_the_api_limit_is_a_configuration_error(remyx):
    with pytest.raises(ConfigurationError, match="at most 50"):
        RemyxCatalog("test-key", base_url=remyx.base_url).search("x", max_results=51)
    assert remyx.requests == []


def test_list_pages_and_filters(remyx):
    catalog = RemyxCatalog("test-key", base_url=remyx.base_url)
    assert [p.arxiv_id for p in catalog.list(limit=2)] == ["2010.11929v2", "1810.04805"]
    assert [p.arxiv_id for p in catalog.list(limit=2, offset=2)] == ["1512.03385"]
    assert [p.arxiv_id for p in catalog.list(has_docker=False)] == ["1810.04805"]
    assert [p.arxiv_id for p in catalog.list(category="cs.CV", has_docker=True)] == [
        "2010.11929v2",
        "1512.03385",
    ]
    assert remyx.requests[-1].query == {
        "limit": "20",
        "offset": "0",
        "has_docker": "true",
        "category": "cs.CV",
    }


def test_list_accepts_a_bare_list(remyx, monkeypatch):
    monkeypatch.setattr(remyx, "answer", lambda request: (200, [BERT]))
    assert [p.arxiv_id for p in RemyxCatalog("test-key", base_url=remyx.base_url).list()] == ["1810.04805"]


def test_stats(remyx):
    assert RemyxCatalog("test-key", base_url=remyx.base_url).stats() == {"total_assets": 3, "with_docker": 2}


def test_the_explicit_key_is_the_key_sent_and_beats_the_environment(remyx, monkeypatch):
    monkeypatch.setenv("REMYXAI_API_KEY", "env-key")
    RemyxCatalog("test-key", base_url=remyx.base_url).get("1810.04805")
    assert remyx.authorization == ["Bearer test-key"]


def test_the_environment_key_is_used_without_an_explicit_one(remyx, monkeypatch):
    monkeypatch.setenv("REMYXAI_API_KEY", "test-key")
    catalog = RemyxCatalog(base_url=remyx.base_url)
    monkeypatch.setenv("REMYXAI_API_KEY", "changed-later")  # read once, when the catalog is made
    assert catalog.get("1810.04805").title.startswith("BERT")
    assert remyx.authorization == ["Bearer test-key"]


def test_the_url_comes_from_remyxai_api_url(remyx, monkeypatch):
    monkeypatch.setenv("REMYXAI_API_URL", remyx.base_url + "/")
    catalog = RemyxCatalog("test-key")
    assert catalog.base_url == remyx.base_url
    assert catalog.get("1512.03385").has_docker is True
    assert len(remyx.requests) == 1


def test_the_default_url_is_the_remyx_engine(monkeypatch):
    monkeypatch.delenv("REMYXAI_API_URL", raising=False)
    assert RemyxCatalog("k").base_url == "https://engine.remyx.ai/api/v1.0"


def test_missing_key_says_how_to_set_it(remyx):
    catalog = RemyxCatalog(base_url=remyx.base_url)
    with pytest.raises(
        CatalogError, match=r"no Remyx API key: set REMYXAI_API_KEY or pass RemyxCatalog\(api_key="
    ):
        catalog.search("transformers")
    assert remyx.requests == []


@pytest.mark.parametrize(
    "explicit, source", [(True, r"RemyxCatalog\(api_key=\.\.\.\)"), (False, "REMYXAI_API_KEY")]
)
def test_a_refused_key_names_its_source_and_is_not_printed(remyx, monkeypatch, explicit, source):
    monkeypatch.setenv("REMYXAI_API_KEY", "wrong-secret")
    catalog = RemyxCatalog("wrong-secret" if explicit else None, base_url=remyx.base_url)
    with pytest.raises(CatalogError, match=f"refused the API key from {source} \\(401") as caught:
        catalog.get("2010.11929v2")
    assert "wrong-secret" not in str(caught.value)
    assert not isinstance(caught.value, PaperNotFoundError)
    assert remyx.authorization == ["Bearer wrong-secret"]


def test_an_unknown_paper_is_not_found_and_says_how_to_search(remyx):
    with pytest.raises(PaperNotFoundError, match="execbox papers search") as caught:
        RemyxCatalog("test-key", base_url=remyx.base_url).get("9999.99999")
    assert caught.value.arxiv_id == "9999.99999"
    assert remyx.base_url in str(caught.value)


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_say_try_again_later(remyx, status):
    remyx.status = status
    with pytest.raises(
        CatalogError, match=f"at {remyx.base_url} answered {status}: fake failure {status}: .*try again later"
    ):
        RemyxCatalog("test-key", base_url=remyx.base_url).search("vision")


def test_a_server_error_on_get_is_not_a_missing_paper(remyx):
    remyx.status = 503
    with pytest.raises(CatalogError) as caught:
        RemyxCatalog("test-key", base_url=remyx.base_url).get("2010.11929v2")
    assert not isinstance(caught.value, PaperNotFoundError)


def test_an_unreachable_api_names_the_url_and_the_variable(monkeypatch):
    url = f"http://127.0.0.1:{free_port()}/api/v1.0"
    monkeypatch.setenv("REMYXAI_API_URL", url)
    with pytest.raises(CatalogError, match=f"cannot reach the Remyx API at {url} \\(from REMYXAI_API_URL\\)"):
        RemyxCatalog("k").stats()


def test_a_slow_api_times_out_naming_the_setting(remyx):
    remyx.delay_s = 2
    with pytest.raises(
        CatalogError, match=r"did not answer within 0.3 s \(RemyxCatalog\(timeout_s=\.\.\.\)\)"
    ):
        RemyxCatalog("test-key", base_url=remyx.base_url, timeout_s=0.3).stats()


def test_an_answer_that_is_not_json(remyx):
    remyx.invalid_json = True
    with pytest.raises(CatalogError, match="not JSON: '<html>Service temporarily unavailable</html>'"):
        RemyxCatalog("test-key", base_url=remyx.base_url).search("vision")


def test_an_answer_of_the_wrong_shape(remyx, monkeypatch):
    monkeypatch.setattr(remyx, "answer", lambda request: (200, {"papers": "none"}))
    with pytest.raises(CatalogError, match="cannot use"):
        RemyxCatalog("test-key", base_url=remyx.base_url).search("vision")


def test_a_wrong_base_path_is_not_a_missing_paper_on_list(remyx):
    wrong = remyx.base_url.replace("/api/v1.0", "/v2")
    with pytest.raises(CatalogError, match=r"should end in /api/v1.0"):
        RemyxCatalog("test-key", base_url=wrong).list()


def test_bad_options_are_configuration_errors():
    with pytest.raises(ConfigurationError, match="timeout_s"):
        RemyxCatalog("k", timeout_s=0)
    with pytest.raises(ConfigurationError, match="http://"):
        RemyxCatalog("k", base_url="engine.remyx.ai")
    with pytest.raises(ConfigurationError, match="query"):
        RemyxCatalog("k").search("  ")
    assert "k" not in repr(RemyxCatalog("k")).replace("key=", "").replace("timeout", "")


# -- LocalCatalog ----------------------------------------------------------------

TOML = """
[[papers]]
arxiv_id = "2010.11929v2"
title = "An Image is Worth 16x16 Words: Transformers for Image Recognition"
abstract = "Image patches in a transformer. Image classification."
categories = ["cs.CV"]
docker_image = "remyxai/vit:latest"
environment_vars = ["HF_TOKEN"]

[[papers]]
arxiv_id = "1810.04805"
title = "BERT"
abstract = "Transformers for language; image not involved."
authors = "Jacob Devlin, Ming-Wei Chang"
categories = ["cs.CL"]

[[papers]]
arxiv_id = "local.0001"
title = "Our own image model"
categories = ["cs.CV"]
"""


@pytest.fixture
def toml_file(tmp_path) -> Path:
    path = tmp_path / "papers.toml"
    path.write_text(TOML)
    return path


def test_local_catalog_from_toml(toml_file):
    catalog = LocalCatalog(toml_file)
    vit = catalog.get("2010.11929v2")
    assert vit.has_docker and vit.docker_image == "remyxai/vit:latest"
    assert vit.environment_vars == ("HF_TOKEN",)
    assert catalog.get("1810.04805").authors == ("Jacob Devlin", "Ming-Wei Chang")
    with pytest.raises(PaperNotFoundError, match=f"catalog file {toml_file}.*execbox papers search"):
        catalog.get("0000.00000")


def test_local_search_needs_every_word_and_ranks_by_hits(toml_file):
    catalog = LocalCatalog(toml_file)
    # "image" occurs 4 times for ViT, once for BERT and for local.0001.
    assert [p.arxiv_id for p in catalog.search("IMAGE")] == ["2010.11929v2", "1810.04805", "local.0001"]
    assert [p.arxiv_id for p in catalog.search("image transformers")] == ["2010.11929v2", "1810.04805"]
    assert [p.arxiv_id for p in catalog.search("devlin")] == ["1810.04805"]
    assert [p.arxiv_id for p in catalog.search("cs.cv model")] == ["local.0001"]
    assert [p.arxiv_id for p in catalog.search("image", has_docker=True)] == ["2010.11929v2"]
    assert [p.arxiv_id for p in catalog.search("image", categories=["cs.CL"])] == ["1810.04805"]
    assert [p.arxiv_id for p in catalog.search("image", max_results=1)] == ["2010.11929v2"]
    assert catalog.search("quantum") == []


def test_local_list_and_stats(toml_file):
    catalog = LocalCatalog(toml_file)
    assert [p.arxiv_id for p in catalog.list(limit=1, offset=1)] == ["1810.04805"]
    assert [p.arxiv_id for p in catalog.list(category="cs.cv")] == ["2010.11929v2", "local.0001"]
    assert [p.arxiv_id for p in catalog.list(has_docker=False)] == ["1810.04805", "local.0001"]
    assert catalog.stats() == {"total": 3, "with_docker": 1, "categories": {"cs.CL": 1, "cs.CV": 2}}


@pytest.mark.parametrize("content", [json.dumps({"papers": [VIT, BERT]}), json.dumps([VIT, BERT])])
def test_local_catalog_from_json(tmp_path, content):
    path = tmp_path / "papers.json"
    path.write_text(content)
    catalog = LocalCatalog(path)
    assert catalog.get("2010.11929v2") == PaperAsset.from_dict(VIT)
    assert [p.arxiv_id for p in catalog.list()] == ["2010.11929v2", "1810.04805"]


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("p.toml", '[[papers]]\narxiv_id = "1"\ntitle = \n', r"is not valid TOML: .*line 3"),
        ("p.json", '{"papers": [\n{"arxiv_id": "1",}\n]}', r"is not valid JSON: .* at line 2, column"),
        ("p.toml", '[[papers]]\ntitle = "Nameless"\n', r"paper #1 \('Nameless'\) has no arxiv_id"),
        (
            "p.json",
            json.dumps([{"arxiv_id": "1"}, {"arxiv_id": "2"}, {"arxiv_id": "1"}]),
            r"arxiv_id '1' appears twice \(papers #1 and #3\)",
        ),
        ("p.toml", 'title = "no tables"\n', r"has no \[\[papers\]\] tables"),
        ("p.json", '{"items": []}', r"must hold a list of papers"),
        ("p.json", '["2010.11929"]', r"paper #1 is not a table/object"),
        ("p.yaml", "papers: []", r"name it .toml or .json"),
    ],
)
def test_bad_local_files_name_the_file_and_the_problem(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(CatalogError, match=message) as caught:
        LocalCatalog(path).list()
    assert str(path) in str(caught.value)


def test_a_missing_local_file(tmp_path):
    with pytest.raises(CatalogError, match=r"does not exist: check the path \(--catalog FILE"):
        LocalCatalog(tmp_path / "nope.toml").get("1")


# -- ChainedCatalog and default_catalog --------------------------------------------


def test_chain_gets_from_the_first_that_has_it(remyx, toml_file):
    chain = LocalCatalog(toml_file) | RemyxCatalog("test-key", base_url=remyx.base_url)
    assert isinstance(chain, ChainedCatalog) and isinstance(chain, Catalog)
    assert chain.get("2010.11929v2").docker_image == "remyxai/vit:latest"  # the local entry wins
    assert remyx.requests == []
    assert chain.get("1512.03385").docker_image == "remyxai/1512.03385:latest"  # only remote has it
    assert len(remyx.requests) == 1
    with pytest.raises(PaperNotFoundError, match="not-there"):
        chain.get("not-there")


def test_chain_search_and_list_merge_without_duplicates(remyx, toml_file):
    chain = ChainedCatalog(LocalCatalog(toml_file), RemyxCatalog("test-key", base_url=remyx.base_url))
    found = chain.search("image")
    assert [p.arxiv_id for p in found] == ["2010.11929v2", "1810.04805", "local.0001", "1512.03385"]
    assert found[0].docker_image == "remyxai/vit:latest"
    assert [p.arxiv_id for p in chain.list()] == ["2010.11929v2", "1810.04805", "local.0001", "1512.03385"]
    assert [p.arxiv_id for p in chain.list(limit=2, offset=2)] == ["local.0001", "1512.03385"]
    assert [p.arxiv_id for p in chain.search("image", max_results=2)] == ["2010.11929v2", "1810.04805"]
    assert [s["catalog"] for s in chain.stats()["catalogs"]] == [
        f"catalog file {toml_file}",
        f"the Remyx API at {remyx.base_url}",
    ]


def test_chain_get_skips_a_failing_catalog_and_reports_it(remyx, toml_file):
    remyx.status = 503
    chain = ChainedCatalog(RemyxCatalog("test-key", base_url=remyx.base_url), LocalCatalog(toml_file))
    assert chain.get("1810.04805").title == "BERT"  # the failing API did not stop the chain
    with pytest.raises(
        CatalogError,
        match=f"is not in catalog file {toml_file}, and the other catalog failed: .*answered 503",
    ) as caught:
        chain.get("1512.03385")
    assert not isinstance(caught.value, PaperNotFoundError)  # it may exist where the API failed
    with pytest.raises(CatalogError, match="answered 503"):
        chain.search("image")
    with pytest.raises(CatalogError, match=r"cannot look paper 'x' up: .*answered 503"):
        ChainedCatalog(RemyxCatalog("test-key", base_url=remyx.base_url)).get("x")


def test_chains_flatten_and_need_catalogs(toml_file):
    a, b, c = LocalCatalog(toml_file), LocalCatalog(toml_file), LocalCatalog(toml_file)
    assert (a | b | c).catalogs == (a, b, c)
    with pytest.raises(ConfigurationError):
        ChainedCatalog()
    with pytest.raises(ConfigurationError):
        ChainedCatalog("papers.toml")


def test_default_catalog(toml_file, monkeypatch):
    monkeypatch.setenv("REMYXAI_API_KEY", "env-key")
    assert isinstance(default_catalog(), RemyxCatalog)
    chain = default_catalog([toml_file])
    assert isinstance(chain, ChainedCatalog)
    assert [type(c) for c in chain.catalogs] == [LocalCatalog, RemyxCatalog]
    offline = default_catalog([toml_file], offline=True)
    assert isinstance(offline, LocalCatalog) and offline.path == toml_file
    with pytest.raises(ConfigurationError, match="--catalog FILE"):
        default_catalog(offline=True)


def test_errors_are_in_the_tree():
    assert issubclass(PaperNotFoundError, CatalogError)
    assert issubclass(CatalogError, ExecboxError)


# -- the execbox papers command ------------------------------------------------------


def papers(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("REMYXAI_")}
    return subprocess.run(
        [sys.executable, "-m", "execbox.cli", "papers", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "COLUMNS": "120", **(env or {})},
    )


def api_env(remyx: FakeRemyx) -> dict[str, str]:
    return {"REMYXAI_API_URL": remyx.base_url, "REMYXAI_API_KEY": "test-key"}


def test_cli_search_prints_a_table(remyx):
    done = papers("search", "image", "recognition", "--docker", env=api_env(remyx))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["ARXIV", "ID", "DOCKER", "PUBLISHED", "TITLE"]
    assert lines[1].split()[:3] == ["2010.11929v2", "yes", "2020-10-22"]
    assert "An Image is Worth 16x16 Words" in lines[1]
    assert lines[2].split()[:2] == ["1512.03385", "yes"]
    assert remyx.requests[0].body == {
        "query": "image recognition",
        "max_results": 10,
        "use_llm": False,
        "has_docker": True,
    }
    assert remyx.authorization == ["Bearer test-key"]


def test_cli_search_json_and_flags(remyx):
    done = papers(
        "search",
        "transformers",
        "--max-results",
        "1",
        "--category",
        "cs.CL",
        "--llm",
        "--json",
        env=api_env(remyx),
    )
    assert done.returncode == 0, done.stderr
    assert [p["arxiv_id"] for p in json.loads(done.stdout)] == ["1810.04805"]
    assert remyx.requests[0].body == {
        "query": "transformers",
        "max_results": 1,
        "use_llm": True,
        "categories": ["cs.CL"],
    }


def test_cli_search_with_no_match(remyx):
    done = papers("search", "quantum", "gravity", env=api_env(remyx))
    assert done.returncode == 0
    assert "no papers match 'quantum gravity'" in done.stdout


def test_cli_show_prints_every_field(remyx):
    done = papers("show", "2010.11929v2", env={**api_env(remyx), "HF_TOKEN": "x"})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("2010.11929v2  An Image is Worth 16x16 Words")
    for expected in (
        "Alexey Dosovitskiy, Lucas Beyer",
        "cs.CV, cs.LG",
        "https://github.com/google-research/vision_transformer",
        "remyxai/2010.11929v2:latest (build: success)",
        "/app/vit",
        "HF_TOKEN (set)",
        "yes, inline (2 lines)",
        "python -m vit.train --help",
        "Small and self-contained.",
        "pure transformer",
    ):
        assert expected in out, expected


def test_cli_show_json(remyx):
    done = papers("show", "1512.03385", "--json", env=api_env(remyx))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == PaperAsset.from_dict(RESNET).to_dict()


def test_cli_offline_with_a_catalog_file(toml_file):
    done = papers("search", "image", "--catalog", str(toml_file), "--offline")
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()[1:]] == [
        "2010.11929v2",
        "1810.04805",
        "local.0001",
    ]
    shown = papers("show", "1810.04805", "--catalog", str(toml_file), "--offline")
    assert shown.returncode == 0, shown.stderr
    assert "Jacob Devlin, Ming-Wei Chang" in shown.stdout
    assert "Docker image:" in shown.stdout and "none" in shown.stdout


def test_cli_catalog_file_comes_before_the_api(remyx, toml_file):
    done = papers("show", "2010.11929v2", "--catalog", str(toml_file), "--json", env=api_env(remyx))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["docker_image"] == "remyxai/vit:latest"
    assert remyx.requests == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "9999.99999"], "no paper '9999.99999' in the Remyx API at"),
        (["search", "x", "--max-results", "80"], "at most 50"),
    ],
)
def test_cli_errors_are_one_line_exit_2(remyx, args, message):
    done = papers(*args, env=api_env(remyx))
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.startswith("execbox: error: ")
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_cli_errors_offline_and_without_key(toml_file, tmp_path):
    missing = papers("show", "9999.99999", "--catalog", str(toml_file), "--offline")
    assert missing.returncode == 2
    assert "execbox papers search" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    no_key = papers("search", "image")
    assert no_key.returncode == 2
    assert "no Remyx API key: set REMYXAI_API_KEY" in no_key.stderr
    nowhere = papers("search", "image", "--offline")
    assert nowhere.returncode == 2 and "--catalog FILE" in nowhere.stderr
