import io

from dwstok_cli.progress import PlainProgress, RichProgress, human_bytes, make_progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_plain_lines_are_complete_and_flushed():
    s = io.StringIO()
    p = PlainProgress(s, timestamps=False)
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


def test_plain_prints_nothing_for_a_report_after_the_stage_finished():
    # A shard thread still running when a run stops (SIGTERM, Ctrl-C) reports once more
    # after the stage's last line and the error line: that report is dropped.
    s = io.StringIO()
    p = PlainProgress(s, timestamps=False)
    p.start("pretokenize", total_bytes=2_000_000, total_items=2)
    p.advance(bytes=1_000_000, docs=10, items=0)
    p.finish(ok=False)
    p.note("Error: terminated (SIGTERM); finished work is kept: re-run to resume")
    p.advance(bytes=1_000_000, docs=5, items=0)
    lines = s.getvalue().splitlines()
    assert lines[-2].startswith("pretokenize: stopped after ")
    assert lines[-1] == "Error: terminated (SIGTERM); finished work is kept: re-run to resume"
    assert len(lines) == 4


def test_plain_lines_carry_utc_timestamps():
    import re
    import time

    s = io.StringIO()
    before = time.time()
    p = make_progress(stream=s)
    p.start("count", total_bytes=None, total_items=1)
    p.note("count: up to date (w/count)")
    after = time.time()
    lines = s.getvalue().splitlines()
    assert len(lines) == 2
    for line in lines:
        m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (count: .*)", line)
        assert m, line
        t = time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        assert int(before) - 1 <= t <= after + 1
    assert lines[1].endswith(" count: up to date (w/count)")


def test_rich_bar_fits_80_columns():
    s = Tty()
    p = RichProgress(s)
    p.console.force_terminal = True
    p.console.width = 80
    p.start("encode-shards", total_bytes=123_456_789_000, total_items=22)
    p.advance(bytes=12_345_678_900, docs=1_234_567, items=11)
    p.finish()
    import re

    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", s.getvalue())
    lines = [ln for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    assert lines and all(len(ln) <= 80 for ln in lines), lines
    assert any("encode-shards" in ln and "1,234,567 docs" in ln for ln in lines), lines


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
