from collections import Counter

import pytest

from host.game import Rng, seed_commitment, tag_of


def test_the_same_seed_and_seq_give_the_same_draws():
    a, b = Rng(b"s" * 32, 5), Rng(b"s" * 32, 5)
    assert [a.below(1000) for _ in range(50)] == [b.below(1000) for _ in range(50)]


def test_seq_and_stream_separate_the_draws():
    draws = {
        (seq, stream): tuple(Rng(b"s", seq, stream).below(10**9) for _ in range(3))
        for seq in range(3)
        for stream in ("game", "bot0")
    }
    assert len(set(draws.values())) == len(draws)


def test_draws_are_stable_across_python_versions():
    # Pinned output of the SHA-256 counter construction: a change here breaks old replays.
    assert Rng(b"gamehost", 0).shuffled(range(10)) == GOLDEN_SHUFFLE


GOLDEN_SHUFFLE = [3, 8, 2, 5, 9, 0, 4, 7, 1, 6]


def test_shuffle_is_a_permutation_and_roughly_uniform():
    counts = Counter()
    for seq in range(3000):
        out = Rng(b"u", seq).shuffled("abc")
        assert sorted(out) == ["a", "b", "c"]
        counts["".join(out)] += 1
    assert len(counts) == 6
    assert min(counts.values()) > 400  # expected 500 each


def test_below_rejects_an_empty_range():
    with pytest.raises(ValueError):
        Rng(b"x", 0).below(0)
    with pytest.raises(IndexError):
        Rng(b"x", 0).choice([])


def test_seed_commitment_is_sha256_hex():
    import hashlib

    assert seed_commitment(b"abc") == hashlib.sha256(b"abc").hexdigest()


def test_tags_are_snake_case_class_names_unless_set():
    class SuitNamed: ...

    class Odd:
        TAG = "weird"

    assert tag_of(SuitNamed) == "suit_named"
    assert tag_of(Odd) == "weird"
