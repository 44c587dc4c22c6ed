"""The getting-started documentation runs as written.

Every shell command (```bash blocks) and every Python snippet (```python
blocks) of README.md and docs/index.md is run, in page order, in a fresh
folder; a command that fails, a snippet that raises (a stale module or
attribute name) or a sample output that no longer matches fails the test.
Quoted outputs (```console blocks: ``$ command`` then the lines it prints)
of docs/cli.md are run and compared line by line with stdout; durations
("0.281 s") compare as "a number of seconds".

``netgen`` is run as ``python -m netgen.cli`` from this checkout (a wrapper
on PATH), so the code under test is what runs, installed or not.

Commands are run exactly as written except the ones in :data:`SUBSTITUTE`,
an explicit mapping from the documented command to what runs instead and
why (installs, the test suite itself, and the commands that take minutes
at the documented size, which run at a small size here). A mapping entry
whose command no longer appears in any page fails the test, so the mapping
cannot go stale silently. In Python snippets ``generated/<name>_<hash>.py``
(a placeholder the pages use for the build's hash) is replaced with the
path the page's earlier ``netgen build`` printed for that name.

CI time: 1.5 minutes on a shared 2-core machine (4 minutes at load
average ~20); the (5, 10450) builds are the longest steps (~6 s each: the
numba and cuda builds write their module without compiling kernels, the
cuda compile check is substituted away, see SUBSTITUTE).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/index.md"]  # the getting-started pages: every bash and python block runs
SCRIPT_PAGES = ["docs/api.md"]  # every python block runs, in order, as one script (names carry over)
SAMPLE_PAGES = ["docs/cli.md"]  # quoted outputs (console blocks) checked
TIMEOUT = 300

SKIP = "not run"
#: documented command -> (what runs instead, or SKIP, and the reason)
SUBSTITUTE = {
    'pip install torch==2.13.0 && pip install -e ".[all]" && netgen build --n 10450 --k 5 --target torch':
        ("netgen build --n 10450 --k 5 --target torch", "the install step is not repeated; the build runs as written"),
    'pip install torch==2.13.0 && pip install -e ".[all]" && pip install --no-deps difftopk==0.2.0 diffsort==0.2.0 '
    '&& python -m pytest -n 2 --dist worksteal --run-slow -q':
        (SKIP, "installs and the whole test suite: this test is part of it"),
    "git clone <this repository's URL> netgen && cd netgen":
        (SKIP, "the tests run in a clone already"),
    "python3 -m venv .venv && . .venv/bin/activate":
        (SKIP, "the tests run in an environment already"),
    "netgen build --n 10450 --k 5 --target cuda":
        ("netgen build --n 10450 --k 5 --target cuda --no-compile",
         "the PTX/cubin compile check takes ~40 CPU-s and needs ptxas; tests/conftest.py's cuda_cli_build runs "
         "this very command once per session (tests/codegen/cuda/test_cuda_ptx.py and others check it)"),
    "netgen table":
        ("netgen table --n 16", "all four n take minutes; n = 16 exercises the same code"),
    "netgen bench --quick -o bench-out":
        ("netgen bench --methods softsort,netgen-torch --n 16 --k 5 --batch 4 --repeats 1 --warmup 0 "
         "--no-plots -o bench-out", "--quick takes ~3 minutes; one tiny configuration per method here"),
    "python examples/digits_sorting.py --n 5":
        (f"python {ROOT / 'examples' / 'digits_sorting.py'} --n 5 --steps 3 --eval-sets 10 --baseline none",
         "1500 training steps take minutes; 3 steps check that the example runs"),
}

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
WROTE = re.compile(r"wrote (\S*?generated/(\w+?)_([0-9a-f]{8})\.py)")
PLACEHOLDER = re.compile(r"generated/(\w+?)_<hash>\.py")
SECONDS = re.compile(r"\b\d+(\.\d+)? s\b")


def blocks(page: str, langs=("bash", "python")):
    """``(lang, text)`` of the page's fenced blocks in order."""
    text = (ROOT / page).read_text()
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text) if m.group(1) in langs]


def commands(text: str) -> list[str]:
    """Shell commands of a bash block: one per line, trailing comments dropped."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """An environment whose ``netgen`` is this checkout's CLI."""
    bindir = tmp_path_factory.mktemp("bin")
    wrapper = bindir / "netgen"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m netgen.cli "$@"\n')
    wrapper.chmod(0o755)
    e = dict(os.environ)
    e["PATH"] = f"{bindir}{os.pathsep}{e.get('PATH', '')}"
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    e.setdefault("NETGEN_NUMBA_PARALLEL", "0")
    e["MPLBACKEND"] = "Agg"
    return e


def run(cmd: str, cwd: Path, env) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)

#: a script page's python line -> (what runs instead, the reason)
PY_SUBSTITUTE = {
    'path = netgen.write_module("cuda", net, r)                   # + the build step: kernels in <stem>.cubins/':
        ('path = netgen.write_module("cuda", net, r, build=False)',
         "the build step compiles 36 kernels (~50 CPU-s); tests/codegen/cuda/test_cuda_cubin_build.py's "
         "test_write_module_gives_what_netgen_build_gives runs this very call"),
    'ranks = soft_rank(torch.randn(1, 2**20), max_size=111_149_056)  # opt in past the 10M budget (refused without)':
        ("ranks = soft_rank(torch.randn(1, 2**12), max_size=111_149_056)",
         "n = 2^20 takes ~6 s and ~1.5 GiB (a 100.7M-comparator network); tests/ops/test_huge.py checks the refusal "
         "and the opt-in, benchmarks/operators.py --cases rank1M runs this call"),
}


def test_substitutions_are_current():
    """Every mapped command still appears on a page (a stale mapping fails)."""
    documented = {c for page in PAGES for lang, text in blocks(page) if lang == "bash" for c in commands(text)}
    stale = [c for c in SUBSTITUTE if c not in documented]
    assert not stale, f"SUBSTITUTE maps commands no page documents any more: {stale}"
    lines = {line for page in SCRIPT_PAGES for _, text in blocks(page, langs=("python",)) for line in text.splitlines()}
    stale = [line for line in PY_SUBSTITUTE if line not in lines]
    assert not stale, f"PY_SUBSTITUTE maps lines no page holds any more: {stale}"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_runs(page, tmp_path, env):
    built = {}  # module name prefix -> path printed by `netgen build`
    ran = 0
    for lang, text in blocks(page):
        if lang == "bash":
            for cmd in commands(text):
                todo, why = SUBSTITUTE.get(cmd, (cmd, None))
                if todo == SKIP:
                    continue
                r = run(todo, tmp_path, env)
                assert r.returncode == 0, (f"{page}: `{cmd}`" + (f" (run as `{todo}`: {why})" if why else "")
                                           + f" exited {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}")
                for m in WROTE.finditer(r.stdout):
                    built[m.group(2)] = m.group(1)
                ran += 1
        else:
            def real_path(m):
                assert m.group(1) in built, f"{page}: a snippet loads {m.group(0)} but no command above builds it"
                return built[m.group(1)]

            code = PLACEHOLDER.sub(real_path, text)
            r = run(f'"{sys.executable}" -c {_quote(code)}', tmp_path, env)
            assert r.returncode == 0, f"{page}: python snippet failed:\n{text}\nstderr: {r.stderr[-3000:]}"
            ran += 1
    assert ran, f"{page}: no runnable block found"


def _defined_and_used(tree):
    """Names a block defines (assignments, imports, defs, loop targets) and
    the names it reads, in source order as ``[(lineno, name, kind)]``."""
    import builtins

    events = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            events.append((node.lineno, node.col_offset, node.id, "load" if isinstance(node.ctx, ast.Load) else "store"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                events.append((node.lineno, -1, (a.asname or a.name).split(".")[0], "store"))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            events.append((node.lineno, -1, node.name, "store"))
        elif isinstance(node, ast.arg):
            events.append((getattr(node, "lineno", 0), -1, node.arg, "store"))
    return sorted(events), set(dir(builtins))


@pytest.mark.parametrize("page", SCRIPT_PAGES + PAGES)
def test_python_blocks_define_what_they_use(page):
    """Every name a python block reads is defined by it or an earlier block
    of the page (or is a builtin): a snippet a reader copies runs after the
    ones above it. Assignments later on the same line count (the right-hand
    side of ``a, b = f(a)`` is checked against earlier lines)."""
    defined, missing = set(), []
    for lang, text in blocks(page, langs=("python",)):
        tree = ast.parse(text)
        events, builtin = _defined_and_used(tree)
        stores_by_line = {}
        for line, _, name, kind in events:
            if kind == "store":
                stores_by_line.setdefault(line, set()).add(name)
        for line, _, name, kind in events:
            if kind == "store":
                defined.add(name)
            elif name not in defined and name not in builtin and name not in stores_by_line.get(line, ()):
                missing.append(f"{name!r} in: {text.splitlines()[line - 1].strip()}")
    assert not missing, f"{page}: python blocks use names no earlier block defines:\n" + "\n".join(missing)


@pytest.mark.slow
@pytest.mark.parametrize("page", SCRIPT_PAGES)
def test_script_page_runs(page, tmp_path, env):
    """The page's python blocks, in order, as one script in an empty folder."""
    code = "\n".join(PY_SUBSTITUTE.get(line, (line,))[0]
                     for _, text in blocks(page, langs=("python",)) for line in text.splitlines())
    r = run(f'"{sys.executable}" -c {_quote(code)}', tmp_path, env)
    assert r.returncode == 0, f"{page}: the python blocks failed as one script:\nstderr: {r.stderr[-3000:]}"


def test_from_files_exist_or_are_written_first():
    """``--from FILE`` in a page's bash blocks names a file of the repository
    or one an earlier command of the page writes (``-o FILE``)."""
    bad = []
    for page in ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]:
        written = set()
        for _, text in blocks(page, langs=("bash",)):
            for cmd in commands(text):
                m = re.search(r"--from\s+(\S+)", cmd)
                if m and m.group(1) not in written and not (ROOT / m.group(1)).exists():
                    bad.append(f"{page}: {cmd}")
                written.update(re.findall(r"(?:-o|--output)\s+(\S+)", cmd))
    assert not bad, "--from names a file that neither exists nor is written above it:\n" + "\n".join(bad)


def _quote(code: str) -> str:
    import shlex

    return shlex.quote(code)


def console_samples(page: str):
    """``(command, expected stdout lines)`` of the page's console blocks."""
    for _, text in blocks(page, langs=("console",)):
        cmd, expected = None, []
        for line in text.splitlines():
            if line.startswith("$ "):
                if cmd is not None:
                    yield cmd, expected
                cmd, expected = line[2:].strip(), []
            elif cmd is not None:
                expected.append(line)
        if cmd is not None:
            yield cmd, expected


def _norm(lines):
    return [SECONDS.sub("<N> s", line.rstrip()) for line in lines if line.strip()]


@pytest.mark.parametrize("page", SAMPLE_PAGES)
def test_quoted_outputs_match(page, tmp_path, env):
    samples = list(console_samples(page))
    assert samples, f"{page}: no console samples found"
    for cmd, expected in samples:
        r = run(cmd, tmp_path, env)
        assert r.returncode == 0, f"{page}: `{cmd}` exited {r.returncode}: {r.stderr[-2000:]}"
        assert _norm(r.stdout.splitlines()) == _norm(expected), (
            f"{page}: the quoted output of `{cmd}` is stale.\nquoted:\n" + "\n".join(expected)
            + "\nactual:\n" + r.stdout)


def test_kernel_count_in_targets_md():
    """docs/targets-cuda.md's count of the compile-checked CUDA kernels equals
    what tests/codegen/cuda/test_cuda_ptx.py checks (kinds x 2 dtypes x variants)."""
    tree = ast.parse((ROOT / "tests" / "codegen" / "cuda" / "test_cuda_ptx.py").read_text())
    consts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    count = len(consts["KERNELS"]) * 2 * len(consts.get("VARIANTS", ("",)))
    text = (ROOT / "docs" / "targets-cuda.md").read_text()
    m = re.search(r"test_cuda_ptx\.py`: all (\d+) kernels", text)
    assert m, "docs/targets-cuda.md no longer states how many kernels test_cuda_ptx.py compiles"
    assert int(m.group(1)) == count, f"docs/targets-cuda.md says {m.group(1)} kernels, the test compiles {count}"


def test_no_design_md_outside_docs():
    """The docs stand alone: nothing cites a DESIGN.md the repository lacks."""
    hits = []
    for top in ("netgen", "docs", "tests", "benchmarks", "examples"):
        for p in (ROOT / top).rglob("*"):
            if p.suffix in (".py", ".md") and p.name != "test_docs.py" and "DESIGN.md" in p.read_text(errors="ignore"):
                hits.append(str(p.relative_to(ROOT)))
    if "DESIGN.md" in (ROOT / "README.md").read_text():
        hits.append("README.md")
    assert not hits, f"references to DESIGN.md (use docs/design.md): {hits}"


def _anchors(text: str) -> set:
    """The anchors GitHub gives a page's headings: lower case, punctuation
    but ``-`` and ``_`` dropped, spaces to ``-``; a repeated heading gets
    ``-1``, ``-2``, ... (headings inside code fences are not headings)."""
    out, seen, fence = set(), {}, False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            seen[slug] = seen.get(slug, -1) + 1
            out.add(slug if seen[slug] == 0 else f"{slug}-{seen[slug]}")
    return out


def test_links_between_pages_resolve():
    """Every relative link of README.md and docs/*.md names a file that
    exists and, with ``#anchor``, a heading of that page (a page split or a
    heading renamed must not leave links dangling)."""
    bad = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            f = page.parent / path if path else page
            if not f.exists():
                bad.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and f.suffix == ".md" and anchor not in _anchors(f.read_text()):
                bad.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not bad, "dangling links:\n" + "\n".join(bad)
