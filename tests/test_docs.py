"""The documentation's code blocks are tested, each by its kind (the table in
docs/testing.md): a spec compiles (and passes `check`, or is refused, where its title says
so), a console command runs, a shell command parses with ptodsl's own argument parser, a
Python block runs. A builtin, module, flag or `--emit` stage the docs name and the compiler
no longer has fails here, and so does one the compiler has and the reference leaves out."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from conftest import ROOT
from markdown.extensions.toc import slugify

import ptodsl
from ptodsl.checking.check import format_report, run_check
from ptodsl.frontend.typecheck import COOKBOOK, COOKBOOK_SECTION, builtin_functions
from ptodsl.ir.modules import MODULES
from ptodsl.runtime import settings
from ptodsl.tools.cli import _parser

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>.*)$")
INFO = re.compile(r'^\s*(?P<language>[\w-]*)\s*(?:title="(?P<title>[^"]*)")?\s*$')
SHOWN_ONLY = {"text", "toml", "json"}
KINDS = {"pto", "console", "sh", "python", *SHOWN_ONLY}


@attrs.frozen
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    title: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """The file a titled spec is saved as for the page's console blocks."""
        name = self.title.split(" ")[0]
        return name if name.endswith(".pto") else None


def blocks_of(page: Path) -> list[Block]:
    found: list[Block] = []
    opening: tuple[int, str, re.Match] | None = None
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if opening is None and fence:
            info = INFO.match(fence["info"])
            assert info, f'{page.name}:{number}: a fence\'s info is `LANGUAGE title="..."`'
            opening, body = (number, fence["indent"], info), []
        elif opening is not None and fence and fence["info"].strip() == "":
            start, _, info = opening
            found.append(
                Block(page, start, info["language"], info["title"] or "", "\n".join(body) + "\n")
            )
            opening = None
        elif opening is not None:
            body.append(line.removeprefix(opening[1]))
    assert opening is None, f"{page.name}:{opening[0]}: a fence never closed"
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]


def blocks(*languages: str) -> list:
    return [pytest.param(b, id=b.where) for b in BLOCKS if b.language in languages]


def test_every_block_names_a_kind_the_tests_know():
    unknown = [f"{b.where}: `{b.language}`" for b in BLOCKS if b.language not in KINDS]
    assert not unknown, "write one of " + ", ".join(sorted(KINDS)) + ": " + "; ".join(unknown)


@pytest.mark.parametrize("block", blocks("pto"))
def test_a_documented_spec_compiles_or_is_refused_as_its_title_says(block):
    if block.title.endswith("(error)"):
        with pytest.raises(ptodsl.SpecError):
            ptodsl.compile(block.text, name=block.file_name or block.where)
        return
    compiled = ptodsl.compile(block.text, name=block.file_name or block.where, tuning=None)
    if block.title.endswith("(checked)"):
        report = run_check(compiled)
        assert report.verdict == "PASS", format_report(report)


def _working_folder(page: Path, tmp_path: Path) -> Path:
    """Where a page's commands run: its titled specs, and the repository's examples and
    problems at the paths the docs use."""
    for name in ("examples", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    for block in BLOCKS:
        if block.page == page and block.file_name and not block.title.endswith("(error)"):
            (tmp_path / block.file_name).write_text(block.text, encoding="utf-8")
    return tmp_path


def _commands(block: Block, prompt: str) -> list[list[str]]:
    """The commands a block shows: its lines after `prompt` (lines without it are output)."""
    lines = block.text.splitlines()
    commands = [line.removeprefix(prompt) for line in lines if line.startswith(prompt)]
    return [words for line in commands if (words := shlex.split(line, comments=True))]


@pytest.mark.parametrize("block", blocks("console"))
def test_a_documented_console_command_runs(block, tmp_path):
    folder = _working_folder(block.page, tmp_path)
    expected = int(block.title.removeprefix("exit ")) if block.title.startswith("exit ") else 0
    commands = _commands(block, "$ ")
    assert commands, f"{block.where}: a console block shows at least one `$ ` command"
    for words in commands:
        assert words[0] == "ptodsl", f"{block.where}: console blocks run ptodsl commands only"
        result = subprocess.run(
            [sys.executable, "-m", "ptodsl", *words[1:]],
            cwd=folder, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert result.returncode == expected, (words, result.stdout, result.stderr)


MAKE_TARGETS = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))


@pytest.mark.parametrize("block", blocks("sh", "console"))
def test_a_documented_command_parses(block, monkeypatch):
    """Every `ptodsl` command shown (run or not) parses with the real argument parser, so a
    flag, command or `--emit` stage that no longer exists fails; `make X` names a target.
    Paths are the repository's, as the docs write them."""
    monkeypatch.chdir(ROOT)
    prompt = "$ " if block.language == "console" else ""
    for words in _commands(block, prompt):
        words = [w for w in words if w != "\\"]
        while words and re.fullmatch(r"\w+=\S*", words[0]):  # VARIABLE=value ptodsl ...
            words = words[1:]
        if words[0].endswith("ptodsl"):
            try:
                _parser().parse_args(words[1:])
            except SystemExit:
                pytest.fail(f"{block.where}: `{shlex.join(words)}` does not parse")
        elif words[0] == "make":
            assert set(words[1:]) <= MAKE_TARGETS, f"{block.where}: {words}"


@pytest.mark.parametrize("block", blocks("python"))
def test_a_documented_python_block_runs(block, tmp_path):
    folder = _working_folder(block.page, tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", block.text], cwd=folder, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _table_names(page: Path, heading: str) -> set[str]:
    """The names the rows of the table under `## heading` start with: | `name(...` |."""
    text = page.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\|\s*`(\w+)\(", section, re.MULTILINE))


def test_the_language_reference_lists_every_builtin_and_no_other():
    assert _table_names(DOCS / "language.md", "Builtins") == set(builtin_functions())


def test_the_language_reference_lists_every_module_and_no_other():
    assert _table_names(DOCS / "language.md", "Modules") == set(MODULES)


def test_the_cli_reference_lists_every_variable_ptodsl_reads_and_no_other():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    section = text.split("\n## Environment\n", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\|\s*`(\w+)`", section, re.MULTILINE)) == set(settings.VARIABLES)


def test_every_cookbook_section_a_diagnostic_names_exists():
    """The notes for torch functions without a builtin link `docs/cookbook.md#SECTION`."""
    text = (ROOT / COOKBOOK).read_text(encoding="utf-8")
    headings = {slugify(h, "-") for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    assert set(COOKBOOK_SECTION.values()) <= headings


def test_the_cli_reference_is_generated_from_the_parser():
    """docs/cli.md holds the marker the site's hook replaces; every command is there."""
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        from cli_reference import cli_reference
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    text = cli_reference()
    for command in ("compile", "check", "tune", "coverage", "bench"):
        assert f"## `ptodsl {command}`" in text
    assert "--emit" in text and "kernelbench" in text
    assert "<!-- cli-reference -->" in (DOCS / "cli.md").read_text(encoding="utf-8")


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    """`make docs`: mkdocs --strict fails on a broken link, a missing page or an API
    reference that no longer resolves."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "cookbook" / "index.html").is_file()
