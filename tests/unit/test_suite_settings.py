"""The suite's own settings hold (tests/conftest.py): no hypothesis test carries a timing assertion."""

from hypothesis import settings


def test_hypothesis_has_no_deadline() -> None:
    """The default deadline (200 ms an example) failed CI on a loaded machine: the profile turns it off."""
    assert settings.default is not None
    assert settings.default.deadline is None


def test_settings_with_other_options_inherit_no_deadline() -> None:
    """``@settings(max_examples=...)`` as the suite writes it derives from the profile: no deadline."""
    assert settings(max_examples=300).deadline is None
