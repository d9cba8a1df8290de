"""MkDocs hook: the CLI reference page is generated from ptodsl's own argument parser, so
it lists exactly the commands, options, choices and defaults the installed `ptodsl` has.
docs/cli.md holds the marker this replaces."""

from __future__ import annotations

import argparse

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, page, **_) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())


def cli_reference() -> str:
    from ptodsl.tools.cli import _parser

    parser = _parser()
    parts = [_options_table(parser, "Options before the command")]
    for name, command in _commands(parser).items():
        usage = command.format_usage().removeprefix("usage: ").strip()
        parts.append(f"## `ptodsl {name}`\n\n{_sentence(command.description or '')}")
        parts.append(f"```text\n{usage}\n```")
        parts.append(_options_table(command, "Arguments and options"))
    return "\n\n".join(part for part in parts if part) + "\n"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (subparsers,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in subparsers._choices_actions}
    for name, command in subparsers.choices.items():
        command.description = command.description or helps.get(name, "")
    return dict(subparsers.choices)


def _options_table(parser: argparse.ArgumentParser, caption: str) -> str:
    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        rows.append(f"| {_spelling(action)} | {_cell(_description(action, parser.prog))} |")
    if not rows:
        return ""
    return f"**{caption}**\n\n| | |\n|---|---|\n" + "\n".join(rows)


def _spelling(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes_value = action.nargs != 0
    metavar = action.metavar or action.dest.upper()
    return ", ".join(
        f"`{option} {metavar}`" if takes_value else f"`{option}`"
        for option in action.option_strings
    )


def _description(action: argparse.Action, prog: str) -> str:
    """The help as `--help` prints it (%(default)s expanded), then the choices and the
    default where the help does not already say them."""
    help_text = (action.help or "") % dict(vars(action), prog=prog)
    text = _sentence(help_text)
    choices = [str(choice) for choice in action.choices or ()]
    if choices and not all(choice in help_text for choice in choices):
        text += " Choices: " + ", ".join(f"`{choice}`" for choice in choices) + "."
    if action.default not in (None, False, [], argparse.SUPPRESS) and action.nargs != 0:
        if "default" not in help_text:
            text += f" Default: `{action.default}`."
    return text


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].upper() + text[1:] + ("" if not text or text.endswith(".") else ".")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
