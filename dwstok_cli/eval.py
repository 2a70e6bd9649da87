"""`dwstok eval MODEL...`: what a build is worth, group by group, against references."""

from __future__ import annotations

import json
import sys

import click


def _set_debug(ctx: click.Context, _param, value: bool) -> bool:
    if value:
        ctx.ensure_object(dict)
        ctx.obj["debug"] = True
    return value


@click.command("eval")
@click.argument("models", nargs=-1, required=True, type=click.Path())
@click.option("--corpus", "corpus", multiple=True, type=click.Path(),
              help="Eval corpus file or folder (any format the stages read), grouped by its language field; repeatable.")
@click.option("--compare", default=None, metavar="NAMES",
              help="Reference tokenizers, comma-separated: gpt2,cl100k,o200k,mistral.")
@click.option("--baseline", default=None, metavar="NAME",
              help="Tokenizer the changes are measured against (a model's version or a reference) [default: the first].")
@click.option("--parallel", type=click.Path(file_okay=False), default=None,
              help="Folder of <lang>.txt files holding the same text (e.g. the UDHR), for fairness.")
@click.option("--reference-dir", type=click.Path(file_okay=False), default=None, envvar="DWSTOK_REFTOK",
              help="Folder with r50k_base/cl100k_base/o200k_base.tiktoken, encodings.json and "
              "mistral7b_v0.1.tokenizer.model [env: DWSTOK_REFTOK].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write report.html (self-contained, with charts) and report.json here.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Encoding threads [default: CPU count].")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schema dwstok-eval/1) on stdout.")
@click.option("--debug", is_flag=True, expose_value=False, callback=_set_debug, is_eager=True, help="Show tracebacks on errors.")
def command(models, corpus, compare, baseline, parallel, reference_dir, out_dir, threads, as_json) -> None:
    """Evaluate MODEL(s) (a model.json, or a build's workdir) on a corpus.

    \b
    Sections: compression per language group (bytes/token, tokens per 1k chars, the
    change against --baseline), balance weights, Han coverage, digit splits, fairness
    on parallel text, a token audit (unreachable, dead, rare, scaffold, longest,
    glitch candidates) and StochasTok.

    \b
    dwstok eval work/32.1 work/32.2 work/32.3 --corpus dev.parquet \\
        --compare o200k,mistral --reference-dir reftok --parallel udhr --out report/
    """
    from stages.evaluate.render_terminal import render_plain, render_rich, tables
    from stages.evaluate.run import evaluate

    def say(msg: str) -> None:
        click.echo(msg, err=True)

    report = evaluate(
        models,
        corpus=corpus,
        compare=compare,
        baseline=baseline,
        parallel=parallel,
        reference_dir_opt=reference_dir,
        threads=threads,
        progress=say,
    )
    if out_dir:
        from stages.evaluate.report_html import write_report

        page = write_report(report, out_dir)
        say(f"eval: wrote {page}")
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=1))
        return
    ts = tables(report)
    if sys.stdout.isatty():
        from rich.console import Console

        render_rich(ts, Console())
    else:
        click.echo(render_plain(ts))
    click.echo(f"eval: {report['timings']['total']:.1f} s", err=True)
