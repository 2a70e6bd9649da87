"""`dwstok verify WORKDIR`: check every stage's manifest, output hashes and upstream chain."""

from __future__ import annotations

import json

import click


@click.command("verify")
@click.argument("workdir", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (one object per stage) instead of text.")
def command(workdir: str, as_json: bool) -> None:
    """Check WORKDIR without changing it: each stage's manifest, every output's sha256,
    and that each stage was built from the upstream result now in place, with the same
    config sections.

    Prints one line per stage; exits 4 when a stage fails its check (the line says which
    file or which upstream), 3 when WORKDIR holds no finished stage.
    """
    from pathlib import Path

    from dwstok.errors import InputError, ModelFileError
    from stages.verify import verify_workdir

    from .progress import human_bytes

    if not Path(workdir).is_dir():
        raise InputError(f"workdir {workdir} not found")
    checks = verify_workdir(workdir)
    if as_json:
        click.echo(json.dumps([vars(c) for c in checks], indent=1, ensure_ascii=False))
    else:
        width = max(len(c.stage) for c in checks)
        for c in checks:
            what = f"{c.files} file{'s' if c.files != 1 else ''}, {human_bytes(c.bytes)}" if c.files else ""
            detail = "; ".join(x for x in (what, c.detail) if x)
            click.echo(f"{c.stage.ljust(width)}  {c.status.upper() if not c.ok else c.status}  {detail}".rstrip())
    failed = [c.stage for c in checks if not c.ok]
    if failed:
        raise ModelFileError(f"{workdir}: {', '.join(failed)} failed verification (see above)")
    if all(c.status != "ok" for c in checks):
        raise InputError(f"{workdir} holds no finished stage to verify")
