"""Fixtures: the real controller (skipped, with the reason, when its binary is absent)."""

import itertools

import pytest

from harness import Controller, find_binary

_ids = itertools.count()


def _binary():
    binary = find_binary()
    if binary is None:
        pytest.skip("SKIPPED: foresight binary not found (set FORESIGHT_BIN or build target/release/foresight)")
    return binary


@pytest.fixture(scope="session")
def controller(tmp_path_factory):
    """One controller shared by the tests that do not stop it."""
    ctl = Controller(_binary(), tmp_path_factory.mktemp("controller"))
    ctl.start()
    yield ctl
    ctl.stop()


@pytest.fixture
def own_controller(tmp_path):
    """A controller of the test's own, which the test may kill and restart."""
    ctl = Controller(_binary(), tmp_path)
    ctl.start()
    yield ctl
    ctl.stop()


@pytest.fixture
def tenant():
    """A tenant per test, so tests never see each other's reservations."""
    return f"test-{next(_ids)}"
