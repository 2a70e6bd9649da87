"""count's partitioned reduce equals the in-memory one; pruning is exact at its boundary;
counts past 2**32 stay exact from count to train."""

import random

import numpy as np
import pyarrow as pa
import pytest

from dwstok.errors import ConfigError
from stages import Inputs, count, pretokenize, train
from stages.count import pivot, read_pieces, reduce_parts
from stages.count_partitions import prune, reduce_partitioned, write_pieces
from stages.executors import LocalExecutor
from stages.manifest import read_json, read_manifest

from .conftest import config, docs, write_parquet


@pytest.fixture
def parts(tmp_path):
    """Pretokenize shards of the small corpus (many shards) and their languages."""
    corpus = write_parquet(tmp_path / "c.parquet", docs(4), row_group_size=4)
    w = tmp_path / "w"
    m = pretokenize.run(config(), Inputs(corpus=[corpus], workdir=w), w / "pretokenize", LocalExecutor(1))
    paths = sorted(w / "pretokenize" / n for n in m.outputs if n.endswith(".arrow"))
    langs = sorted({lang or "und" for _, lang in docs(4)})
    assert len(paths) > 3
    return paths, langs


def in_memory(paths, langs):
    return pivot(reduce_parts(paths, langs), langs)


def partitioned(paths, langs, spill, k, executor=None, **prune_args):
    """The partitioned reduce written as count writes it, read back as one wide table;
    also the two files' bytes and the pruning report."""
    out = spill / "out"
    out.mkdir(parents=True, exist_ok=True)
    meta = lambda report: {"dwstok.format_version": str(count.FORMAT_VERSION), "dwstok.languages": ",".join(langs)}
    parts = reduce_partitioned(paths, langs, spill, k=k, executor=executor)
    _, report = write_pieces(parts, out / count.PIECES, out / count.LANG_COUNTS, metadata=meta, **prune_args)
    wide, _ = read_pieces(out / count.PIECES)
    blobs = ((out / count.PIECES).read_bytes(), (out / count.LANG_COUNTS).read_bytes())
    return wide.replace_schema_metadata(None), blobs, report


@pytest.mark.parametrize("k", [1, 2, 3, 7, 10_000])
def test_partitioned_equals_in_memory(tmp_path, parts, k):
    paths, langs = parts
    ref = in_memory(paths, langs)
    got, blobs, _ = partitioned(paths, langs, tmp_path / "spill", k)
    ref = ref.set_column(0, "piece", ref.column("piece").cast(pa.large_binary()))
    assert got.schema == ref.schema and got.equals(ref)
    _, one, _ = partitioned(paths, langs, tmp_path / "spill1", 1)
    assert blobs == one  # the files' bytes do not depend on K
    assert not list((tmp_path / "spill").glob("rows-*"))  # row spills are removed once reduced


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("k", [1, 3])
def test_shards_split_on_threads_give_the_same_files(tmp_path, parts, k, workers):
    """Each worker spills its run of shards to files of its own; the partitions sum
    them, so the output is the same bytes as one worker's."""
    paths, langs = parts
    _, serial, _ = partitioned(paths, langs, tmp_path / "one", k)
    with LocalExecutor(workers) as ex:
        _, threaded, _ = partitioned(paths, langs, tmp_path / "many", k, executor=ex)
    assert threaded == serial
    assert not list((tmp_path / "many").glob("rows-*"))


def test_small_split_slices_and_samples_change_nothing(tmp_path, parts, monkeypatch):
    # A shard split a few rows at a time, splitters from a few sampled rows: same files.
    import stages.count_partitions as cp

    paths, langs = parts
    _, want, _ = partitioned(paths, langs, tmp_path / "a", 4)
    monkeypatch.setattr(cp, "SPLIT_ROWS", 5)
    monkeypatch.setattr(cp, "SAMPLE_ROWS", 3)
    _, got, _ = partitioned(paths, langs, tmp_path / "b", 4)
    assert got == want


def test_partitions_beyond_the_pieces_are_empty_and_harmless(tmp_path, parts):
    # Splitters below, between and above every piece: some partitions get no rows.
    paths, langs = parts
    ref = in_memory(paths, langs)
    cuts = [b"\x00", b"\x01", b" ", b"a", b"b", b"zz", b"\xf0", b"\xff\xff\xff"]
    import stages.count_partitions as cp

    orig = cp.splitters
    cp.splitters = lambda paths, k: cuts
    try:
        got, _, _ = partitioned(paths, langs, tmp_path / "spill", len(cuts) + 1)
    finally:
        cp.splitters = orig
    assert got.equals(ref.set_column(0, "piece", ref.column("piece").cast(pa.large_binary())))


def test_count_stage_bytes_do_not_depend_on_partitions(tmp_path):
    corpus = write_parquet(tmp_path / "c.parquet", docs(4), row_group_size=4)
    blobs, hashes = set(), set()
    for k in (1, 4, 50):
        cfg = config(count={"partitions": k})
        w = tmp_path / f"k{k}"
        inp = Inputs(corpus=[corpus], workdir=w)
        pretokenize.run(cfg, inp, w / "pretokenize", LocalExecutor(1))
        m = count.run(cfg, inp, w / "count", LocalExecutor(1))
        blobs.add(((w / "count" / "pieces.arrow").read_bytes(), (w / "count" / "lang_counts.arrow").read_bytes()))
        hashes.add((m.config_hash, m.output_hash))
        assert not (w / "count" / "_partitions").exists()
    assert len(blobs) == 1 and len(hashes) == 1
    # partitions never enter the hash; neither does an unset count section
    assert config(count={"partitions": 3}).hash_of("pattern", "count") == config().hash_of("pattern")


def test_config_without_pruning_records_nothing_new():
    cfg = config()
    assert "count" not in cfg.to_dict()
    assert cfg.hash_of(*count.CONFIG_KEYS) == cfg.hash_of("pattern")
    pruned = config(count={"min_count": 2})
    assert pruned.to_dict()["count"] == {"min_count": 2}
    assert pruned.hash_of(*count.CONFIG_KEYS) != cfg.hash_of(*count.CONFIG_KEYS)


@pytest.mark.parametrize(
    "section, match",
    [({"min_count": 0}, "count.min_count"), ({"max_pieces": -1}, "count.max_pieces"),
     ({"partitions": -2}, "count.partitions"), ({"min_cuont": 2}, "count.min_cuont")],
)
def test_bad_count_keys(section, match):
    with pytest.raises(ConfigError, match=match):
        config(count=section)


# -- pruning --------------------------------------------------------------------------
def _table(rows):
    rows = sorted(rows)
    return pa.table({"piece": pa.array([p for p, _ in rows], pa.binary()), "count": pa.array([c for _, c in rows], pa.int64())})


def _brute(rows, min_count, max_pieces):
    kept = [(p, c) for p, c in rows if min_count is None or c >= min_count]
    kept.sort(key=lambda pc: (-pc[1], pc[0]))
    if max_pieces is not None:
        kept = kept[:max_pieces]
    return sorted(p for p, _ in kept)


def test_prune_boundary_ties():
    rows = [(b"b", 5), (b"a", 5), (b"c", 5), (b"z", 9), (b"y", 1), (b"x", 2)]
    t = _table(rows)
    assert prune(t, max_pieces=2)[0].column("piece").to_pylist() == [b"a", b"z"]
    assert prune(t, max_pieces=3)[0].column("piece").to_pylist() == [b"a", b"b", b"z"]
    assert prune(t, min_count=2)[0].column("piece").to_pylist() == [b"a", b"b", b"c", b"x", b"z"]
    assert prune(t, min_count=5)[0].column("piece").to_pylist() == [b"a", b"b", b"c", b"z"]
    assert prune(t, min_count=6, max_pieces=3)[0].column("piece").to_pylist() == [b"z"]
    table, report = prune(t, min_count=3)
    assert report == {"min_count": 3, "unique_pieces_before": 6, "pieces_dropped": 2, "occurrences_dropped": 3}
    assert prune(t, max_pieces=100)[0] is t


def test_prune_matches_brute_force():
    rnd = random.Random(7)
    for _ in range(200):
        pieces = {bytes(rnd.choices(b"ab\x00\xff", k=rnd.randint(1, 3))) for _ in range(rnd.randint(1, 30))}
        rows = [(p, rnd.randint(1, 4)) for p in pieces]
        mc = rnd.choice([None, 1, 2, 3, 5])
        mp = rnd.choice([None, 1, 2, 5, 40])
        got, _ = prune(_table(rows), min_count=mc, max_pieces=mp)
        assert got.column("piece").to_pylist() == _brute(rows, mc, mp)


def test_pruned_build_records_it(tmp_path):
    corpus = write_parquet(tmp_path / "c.parquet", docs(4), row_group_size=4)
    out = {}
    for name, section in (("off", {}), ("on", {"min_count": 4})):
        cfg = config(count=section) if section else config()
        w = tmp_path / name
        inp = Inputs(corpus=[corpus], workdir=w)
        ex = LocalExecutor(1)
        pretokenize.run(cfg, inp, w / "pretokenize", ex)
        count.run(cfg, inp, w / "count", ex)
        train.run(cfg, inp, w / "train", ex)
        out[name] = w
    full, _ = read_pieces(out["off"] / "count" / "pieces.arrow")
    kept, _ = read_pieces(out["on"] / "count" / "pieces.arrow")
    c = full.column("count").to_numpy()
    assert kept.equals(full.filter(pa.array(c >= 4)))
    assert 0 < kept.num_rows < full.num_rows
    assert b"dwstok.pruning" in kept.schema.metadata and b"dwstok.pruning" not in full.schema.metadata
    stats = read_json(out["on"] / "count" / "stats.json")
    assert stats["pruning"]["pieces_dropped"] == full.num_rows - kept.num_rows
    assert "pruning" not in read_json(out["off"] / "count" / "stats.json")
    meta_on = read_json(out["on"] / "train" / "model.json")["metadata"]
    meta_off = read_json(out["off"] / "train" / "model.json")["metadata"]
    assert meta_on["trained_on"]["pruning"]["min_count"] == 4 and meta_on["config"]["count"] == {"min_count": 4}
    assert "pruning" not in meta_off["trained_on"] and "count" not in meta_off["config"]
    assert read_manifest(out["on"] / "count").info["pruning"]["min_count"] == 4


# -- counts past 2**32 ------------------------------------------------------------------
def test_counts_past_2_32_from_count_to_train(tmp_path):
    """Shards whose counts exceed 2**32 (crafted pretokenize parts) reduce, pivot, weigh
    and train exactly: merges equal brute-force BPE on the same (huge) counts."""
    import pyarrow.ipc as ipc

    from dwstok.merge_learner import learn_merges
    from stages.train import piece_weights
    from tests.dwstok.brute_bpe import brute_bpe

    big = 2**33
    base = {b"abab": 3, b"aab": 5, b"bba": 2, b"ab": 7, b"ba": 1}
    paths = []
    for i, (lang, mult) in enumerate((("en", 1), ("de", 2), ("en", 3))):
        t = pa.table({"piece": pa.array(list(base), pa.binary()), "lang": [lang] * len(base),
                      "count": pa.array([c * mult * big for c in base.values()], pa.int64())})
        p = tmp_path / f"part-{i:05d}.arrow"
        with pa.OSFile(str(p), "wb") as s, ipc.new_file(s, t.schema) as w:
            w.write_table(t)
        paths.append(p)
    langs = ["de", "en"]
    for k in (1, 3):
        wide, _, _ = partitioned(paths, langs, tmp_path / f"s{k}", k)
        assert wide.column("count").type == pa.int64()
        d = dict(zip(wide.column("piece").to_pylist(), wide.column("count").to_pylist()))
        assert d == {p: c * 6 * big for p, c in base.items()}
        assert wide.column("lang:en").to_pylist() == [base[p] * 4 * big for p in wide.column("piece").to_pylist()]
    weights = piece_weights(wide, langs, {"de": 1, "en": 1})
    from stages.train import read_pieces_weighted

    data2, offsets2, weights2 = read_pieces_weighted(tmp_path / "s3" / "out", {"de": 3, "en": 1})
    assert weights2.tolist() == piece_weights(wide, langs, {"de": 3, "en": 1}).tolist()
    assert bytes(data2) == b"".join(wide.column("piece").to_pylist()) and offsets2[-1] == len(data2)
    assert weights.dtype == np.int64 and int(weights.max()) == 7 * 6 * big
    data = np.frombuffer(b"".join(wide.column("piece").to_pylist()), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in wide.column("piece").to_pylist()])])
    got = learn_merges(data, offsets, weights, 6)
    pieces = wide.column("piece").to_pylist()
    want = brute_bpe(pieces, [base[p] * 6 * big for p in pieces], 6)
    assert got.merges == want.merges and got.counts.tolist() == want.counts
    assert int(got.counts[0]) > 2**36


@pytest.mark.slow  # Ray takes tens of seconds to start on a loaded machine
def test_ray_reduces_partitions_like_local(tmp_path):
    """count with K partitions reduced as Ray tasks (a private one-CPU cluster; two
    workers, so the shards are split as two tasks too) writes the same bytes as the
    local run."""
    ray = pytest.importorskip("ray")
    from stages.executors import make_executor

    corpus = write_parquet(tmp_path / "c.parquet", docs(4), row_group_size=4)
    cfg = config(count={"partitions": 5})
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        blobs = []
        for name, ex in (("local", LocalExecutor(1)), ("ray", make_executor("ray", 2))):
            w = tmp_path / name
            inp = Inputs(corpus=[corpus], workdir=w)
            pretokenize.run(cfg, inp, w / "pretokenize", ex)
            m = count.run(cfg, inp, w / "count", ex)
            assert m.info["partitions"] == 5
            blobs.append(((w / "count" / "pieces.arrow").read_bytes(), (w / "count" / "lang_counts.arrow").read_bytes()))
    finally:
        ray.shutdown()
    assert blobs[0] == blobs[1]


def test_weighted_counts_that_would_wrap_int64_are_refused():
    # 2**43 occurrences times a 2**20 weight is 2**63: numpy would wrap it to a negative
    # weight without a word.
    from dwstok.errors import InputError
    from stages.train import piece_weights

    t = pa.table({"piece": [b"ab"], "count": pa.array([2**43], pa.int64()), "lang:en": pa.array([2**43], pa.int64())})
    assert piece_weights(t, ["en"], {"en": 2**18}).tolist() == [2**61]
    with pytest.raises(InputError, match="overflow int64"):
        piece_weights(t, ["en"], {"en": 2**20})


@pytest.mark.parametrize("k", [1, 3, 10_000])
def test_pruning_while_writing_equals_pruning_the_whole(tmp_path, parts, k):
    paths, langs = parts
    for args in ({"min_count": 3}, {"max_pieces": 7}, {"min_count": 2, "max_pieces": 5}):
        ref, report = prune(in_memory(paths, langs), **args)
        got, _, got_report = partitioned(paths, langs, tmp_path / f"spill{len(args)}{args.get('max_pieces')}", k, **args)
        assert got.equals(ref.set_column(0, "piece", ref.column("piece").cast(pa.large_binary())))
        assert 0 < report["pieces_dropped"] and got_report == report


def test_stage_prunes_both_ways_like_prune(tmp_path):
    corpus = write_parquet(tmp_path / "c.parquet", docs(4), row_group_size=4)
    out = {}
    for name, section in (("off", {}), ("on", {"min_count": 2, "max_pieces": 25, "partitions": 3})):
        cfg = config(count=section) if section else config()
        w = tmp_path / name
        inp = Inputs(corpus=[corpus], workdir=w)
        pretokenize.run(cfg, inp, w / "pretokenize", LocalExecutor(1))
        count.run(cfg, inp, w / "count", LocalExecutor(1))
        out[name] = read_pieces(w / "count" / "pieces.arrow")[0]
    want, report = prune(out["off"], min_count=2, max_pieces=25)
    assert out["on"].equals(want.replace_schema_metadata(out["on"].schema.metadata)) and want.num_rows == 25
    stats = read_json(tmp_path / "on" / "count" / "stats.json")["pruning"]
    assert stats == report


def test_a_format_1_pieces_file_is_refused(tmp_path):
    from dwstok.errors import ModelFileError
    from stages.manifest import write_table

    t = pa.table({"piece": [b"ab"], "count": pa.array([2], pa.int64()), "lang:en": pa.array([2], pa.int64())})
    write_table(tmp_path / "pieces.arrow", t, metadata={"dwstok.kind": "count-pieces", "dwstok.languages": "en"})
    with pytest.raises(ModelFileError, match="count format 1"):
        read_pieces(tmp_path / "pieces.arrow")


def test_splitters_balance_bytes_not_pieces(tmp_path):
    # Many short pieces, then fewer long ones (as multi-byte scripts sort after ASCII):
    # cut by weight (a row's bytes plus SAMPLE_ROW_BYTES), not at the median piece.
    import pyarrow.ipc as ipc

    import stages.count_partitions as cp

    short = [b"a%03d" % i for i in range(100)]  # 4 bytes each
    long = [b"\xe4" * 60 + bytes([i]) for i in range(25)]  # 61 bytes each
    path = tmp_path / "part-00000.arrow"
    table = pa.table({"piece": pa.array(short + long, pa.binary())})
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    (cut,) = cp.splitters([path], 2)
    weights = [len(p) + cp.SAMPLE_ROW_BYTES for p in sorted(short + long)]
    below = sum(w for p, w in zip(sorted(short + long), weights) if p < cut)
    assert abs(2 * below - sum(weights)) <= 2 * max(weights)  # half the weight on each side
    assert cut > b"a090"  # the median piece would have been a062
    assert cp.splitters([path], 1) == [] and len(cp.splitters([path], 4)) == 3
