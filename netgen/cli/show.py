"""``netgen show FILE``: what a network file holds."""

from __future__ import annotations

import json

import click

from .common import escape, handle_errors, max_size_option


def describe(net) -> dict:
    """n, k, depth, size, comparators per layer and the construction record
    (which carries the passes applied, when the builder recorded them)."""
    return {
        "n": net.n,
        "k": net.k,
        "depth": net.depth,
        "size": net.size,
        "layer_sizes": net.layer_sizes(),
        "outputs": list(net.outputs),
        "construction": net.construction,
        "key": net.key(),
    }


@click.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@max_size_option
@handle_errors
def command(file, as_json):
    """Describe FILE (netgen JSON, Dobbelaere JSON or layer text)."""
    from ..io import load

    d = describe(load(file))
    if as_json:
        click.echo(json.dumps(d))
        return
    c = d["construction"]
    kind = c.get("kind", "custom") if isinstance(c, dict) else "custom"
    sizes = d["layer_sizes"]
    shown = " ".join(map(str, sizes[:40])) + (f" ... ({len(sizes)} layers)" if len(sizes) > 40 else "")
    outs = d["outputs"]
    lines = [
        f"n            {d['n']}",
        f"k            {d['k']}" + (" (sorter)" if d["k"] == d["n"] else ""),
        f"depth        {d['depth']}",
        f"size         {d['size']}",
        f"per layer    {shown}",
        f"outputs      {outs[:16]}{' ...' if len(outs) > 16 else ''}",
        f"construction {_cut(escape(kind) if isinstance(kind, str) else escape(json.dumps(kind)))}",
    ]
    if isinstance(c, dict):
        for key, value in c.items():
            if key == "kind":
                continue
            # json.dumps escapes control characters in strings (ensure_ascii off
            # keeps other text readable); escape() catches what is left (keys)
            text = escape(json.dumps(value, ensure_ascii=False))
            lines.append(f"  {_cut(escape(key))}: {_cut(text)}")
    click.echo("\n".join(lines))


def _cut(text: str, limit: int = 200) -> str:
    """At most ``limit`` characters of a file's string (``--json`` prints it whole)."""
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text):,} characters; --json shows all)"
