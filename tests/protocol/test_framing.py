from protocol.framing import LineBuffer, LineTooLong


def test_lines_split_across_chunks_are_joined():
    b = LineBuffer()
    assert b.feed(b'{"a"') == []
    assert b.feed(b': 1}\n{"b": 2}\n{"c"') == [b'{"a": 1}', b'{"b": 2}']
    assert b.pending == 4
    assert b.feed(b": 3}\n") == [b'{"c": 3}']


def test_crlf_is_accepted_and_blank_lines_are_dropped():
    assert LineBuffer().feed(b"one\r\n\r\n\ntwo\n") == [b"one", b"two"]


def test_over_long_line_is_reported_once_and_skipped_to_the_next_newline():
    b = LineBuffer(max_line=10)
    out = b.feed(b"x" * 8)
    assert out == []
    out = b.feed(b"x" * 8)
    assert out == [LineTooLong(16)]
    assert b.feed(b"y" * 100) == []
    assert b.pending == 0
    assert b.feed(b"zz\nok\n") == [b"ok"]


def test_over_long_line_arriving_whole_is_refused():
    b = LineBuffer(max_line=10)
    assert b.feed(b"x" * 11 + b"\nfine\n") == [LineTooLong(11), b"fine"]


def test_line_of_exactly_the_limit_is_kept():
    b = LineBuffer(max_line=10)
    assert b.feed(b"x" * 10 + b"\n") == [b"x" * 10]


def test_a_kept_line_holds_only_its_own_bytes():
    """orjson leaves its whole output buffer (4 KiB) behind each result; a kept copy does not."""
    import tracemalloc

    import orjson

    from protocol.framing import kept

    tracemalloc.start()
    try:
        line = orjson.dumps({"push": "turn", "session": "s", "seq": 1, "seat": 0, "legal": []})
        made = tracemalloc.get_traced_memory()[0]
        copy = kept(line)
        grown = tracemalloc.get_traced_memory()[0] - made
    finally:
        tracemalloc.stop()
    assert copy == line and copy is not line
    assert grown < 256 <= made  # what orjson holds vs the copy's header and bytes
