"""What the tests of the `tessera` package share: the repository's
fixtures (tests/ at the checkout root) and scratch directories."""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def fixtures():
    return ROOT / "tests"
