"""``host.game.replace``: a faster ``attrs.evolve`` for the games' states and events."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from host.game import replace


@attrs.frozen
class Sample:
    seat: int
    name: str = "x"
    cards: tuple[str, ...] = ()
    _hidden: int = 0
    count: int = attrs.field(default=0, converter=int)
    limit: int = attrs.field(default=1, validator=attrs.validators.ge(0))
    derived: int = attrs.field(init=False, default=7)


CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "seat": st.integers(-5, 5),
        "name": st.text(max_size=3),
        "cards": st.lists(st.sampled_from(["2C", "8H"]), max_size=3).map(tuple),
        "hidden": st.integers(0, 9),
        "count": st.sampled_from([1, "2", 3.0]),
        "limit": st.integers(0, 9),
    },
)


@given(start=st.builds(Sample, seat=st.integers(0, 3), hidden=st.integers(0, 3)), changes=CHANGES)
def test_replace_makes_what_attrs_evolve_makes(start, changes):
    got = replace(start, **changes)
    want = attrs.evolve(start, **changes)
    assert got == want
    assert got._hidden == want._hidden and type(got.count) is int
    assert got is not start


def test_replace_runs_validators_and_refuses_unknown_fields_as_attrs_evolve_does():
    s = Sample(1)
    with pytest.raises(ValueError):
        replace(s, limit=-1)
    with pytest.raises(TypeError):
        replace(s, nope=1)
    with pytest.raises(TypeError):
        replace(s, derived=3)  # not an init field
    assert replace(s) == s
