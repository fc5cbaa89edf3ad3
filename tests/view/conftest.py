"""A small real run directory and its rendered site, shared by the viewer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop_agents.view import build_site
from tests.view.run_factory import write_run_dir


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory, tiny_tokenizer) -> Path:
    return write_run_dir(tmp_path_factory.mktemp("run") / "demo_run", tiny_tokenizer)


@pytest.fixture(scope="session")
def site(run_dir, tiny_model_dir) -> Path:
    """The site rendered with the tokenizer (token views present); returns its folder."""
    return build_site(run_dir, run_dir.parent / "site", tiny_model_dir).parent
