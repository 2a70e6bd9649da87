import io

from dwstok_cli.progress import PlainProgress, RichProgress, human_bytes, make_progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_plain_lines_are_complete_and_flushed():
    s = io.StringIO()
    p = PlainProgress(s)
    p.start("pretokenize", total_bytes=2_000_000, total_items=2)
    p.advance(bytes=1_000_000, docs=10, items=1)
    p.advance(bytes=1_000_000, docs=5, items=1)
    p.finish()
    p.note("count: up to date (w/count)")
    lines = s.getvalue().splitlines()
    assert lines[0] == "pretokenize: starting (2 shards, 2.0 MB)"
    assert lines[1].startswith("pretokenize: 1/2 shards, 1.0 MB, 10 docs, ") and "ETA" in lines[1]
    assert lines[2].startswith("pretokenize: 2/2 shards, 2.0 MB, 15 docs, ") and "ETA" not in lines[2]
    assert lines[3].startswith("pretokenize: done in ")
    assert lines[4] == "count: up to date (w/count)"


def test_choice_follows_the_terminal():
    assert isinstance(make_progress(stream=io.StringIO()), PlainProgress)
    assert isinstance(make_progress(stream=Tty()), RichProgress)


def test_rich_bars_render():
    s = Tty()
    p = RichProgress(s)
    p.console.force_terminal = True
    p.start("pretokenize", total_bytes=1000, total_items=2)
    p.advance(bytes=500, docs=3, items=1)
    p.finish()
    p.note("done")
    out = s.getvalue()
    assert "pretokenize" in out and "3 docs" in out and "done" in out


def test_human_bytes():
    assert [human_bytes(x) for x in (5, 1500, 2_500_000, 3e9)] == ["5 B", "1.5 kB", "2.5 MB", "3.0 GB"]
