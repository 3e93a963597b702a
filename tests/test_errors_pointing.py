"""Errors that name what to change, for the paper executor and its
exploration, checked without the Docker engine: a wrong option is refused
when the object is made or the function called, and the warning about a
paper's unset variable points at the caller's line (the engine is made
unreachable, so starting fails after the warning)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from execbox import BackendUnavailableError, CodeBlock, ConfigurationError
from execbox.papers import LocalCatalog, PaperExecutor, explore


def test_paper_executor_names_the_catalog_for_an_api_key():
    # (was: "DockerExecutor.__init__() got an unexpected keyword argument 'api_key'")
    with pytest.raises(ConfigurationError) as caught:
        PaperExecutor("2010.11929v2", api_key="k")
    message = str(caught.value)
    assert message.startswith("PaperExecutor takes no api_key:")
    assert "catalog=RemyxCatalog(api_key=...)" in message and "DockerExecutor" not in message


def test_paper_executor_names_its_options_for_an_unknown_one():
    with pytest.raises(ConfigurationError) as caught:
        PaperExecutor("2010.11929v2", model="gpt-4o")
    assert "paper.explore(model=...)" in str(caught.value)
    with pytest.raises(ConfigurationError) as caught:
        PaperExecutor("2010.11929v2", bogus=1)
    message = str(caught.value)
    assert message.startswith("PaperExecutor takes no bogus: it takes arxiv_id, ")
    assert "catalog" in message and "volumes" in message and "environment" not in message


@pytest.mark.parametrize("name", ["llm_model", "llm_config"])
def test_explore_names_the_model_parameter(name):
    # (was: TypeError: explore() got an unexpected keyword argument 'llm_model')
    value = "gpt-4o" if name == "llm_model" else {"model": "gpt-4o", "api_key": "k"}
    paper = PaperExecutor(image="execbox-test/none:latest")
    try:
        for call, what in (
            (lambda: paper.explore(**{name: value}), "PaperExecutor.explore()"),
            (lambda: explore(paper, **{name: value}), "explore()"),
            (lambda: paper.create_agents(**{name: value}), "PaperExecutor.create_agents()"),
        ):
            with pytest.raises(ConfigurationError) as caught:
                call()
            message = str(caught.value)
            assert message.startswith(f"{what} takes no {name}: pass model=")
            assert "ModelClient(" in message
        assert not paper._started  # refused before anything started
    finally:
        paper.close()


@pytest.fixture
def unset_variable_paper(tmp_path, monkeypatch):
    catalog = tmp_path / "papers.toml"
    catalog.write_text(
        '[[papers]]\narxiv_id = "9999.00001"\ntitle = "Private"\nworking_directory = "/app"\n'
        'environment_vars = ["EXECBOX_SURELY_UNSET_VAR"]\n'
    )
    monkeypatch.delenv("EXECBOX_SURELY_UNSET_VAR", raising=False)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    return lambda: PaperExecutor(
        "9999.00001", image="execbox-test/none:latest", catalog=LocalCatalog(catalog)
    )


def _start_with(how, paper):
    if how == "start":
        paper.start()
    elif how == "run":
        paper.run(CodeBlock("bash", "true"))
    else:
        with paper:
            pass


@pytest.mark.parametrize("how", ["start", "run", "with"])
def test_the_unset_variable_warning_points_at_the_callers_line(unset_variable_paper, how):
    # (was: stacklevel=4, which pointed at `sys:1` or into pytest for paper.start(), into execbox for run())
    paper = unset_variable_paper()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with pytest.raises(BackendUnavailableError):
                _start_with(how, paper)
        finally:
            paper.close()
    [warning] = [w for w in caught if "EXECBOX_SURELY_UNSET_VAR" in str(w.message)]
    assert "paper 9999.00001 uses EXECBOX_SURELY_UNSET_VAR" in str(warning.message)
    assert warning.filename == __file__
    line = Path(__file__).read_text().splitlines()[warning.lineno - 1].strip()
    assert (
        line
        == {"start": "paper.start()", "run": 'paper.run(CodeBlock("bash", "true"))', "with": "with paper:"}[
            how
        ]
    )
