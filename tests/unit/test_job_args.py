"""%job's command line: parsing, usage errors and help from one definition."""

import pytest

from monarch_jupyter.jobs.args import ArgumentsError, HelpRequested, JobCommand, help_text, parse


@pytest.mark.parametrize(
    "line, command",
    [
        ("", JobCommand("status", {"context": None})),
        ("status exp", JobCommand("status", {"context": "exp"})),
        ("kill", JobCommand("kill", {"context": None})),
        ("kill exp", JobCommand("kill", {"context": "exp"})),
        ("reconnect", JobCommand("reconnect", {})),
        ("context", JobCommand("context ls", {})),
        ("context use exp", JobCommand("context use", {"name": "exp"})),
        ("context rm 'my ctx'", JobCommand("context rm", {"name": "my ctx"})),
        # the spec is kept as typed, for specs.parse_apply
        (
            "apply  --local trainers=4, loaders=1 ",
            JobCommand("apply", {"spec_text": "--local trainers=4, loaders=1"}),
        ),
        ("apply", JobCommand("apply", {"spec_text": ""})),
    ],
)
def test_parse(line, command):
    assert parse(line) == command


@pytest.mark.parametrize(
    "line, message",
    [
        (
            "bogus",
            "%job: unknown subcommand 'bogus'; use status, apply, kill, batch, logs, query, profile, topology, reconnect, refresh, trust, debug or context (see %job?)",
        ),
        ("status a b", "%job status: unrecognized arguments: b (usage: %job status [CONTEXT])"),
        ("reconnect now", "%job reconnect: unrecognized arguments: now (usage: %job reconnect)"),
        ("context frob", "%job context: unknown action 'frob'; use ls, use, create or rm"),
        (
            "context use",
            "%job context use: the following arguments are required: NAME (usage: %job context use NAME)",
        ),
        ("context ls x", "%job context ls: unrecognized arguments: x (usage: %job context ls)"),
        ("kill --force", "%job kill: unrecognized arguments: --force (usage: %job kill [CONTEXT])"),
        ("status 'x", '%job: No closing quotation in "status \'x"'),
    ],
)
def test_bad_lines_are_one_line_with_usage(line, message):
    with pytest.raises(ArgumentsError) as info:
        parse(line)
    assert str(info.value) == message


def test_help_comes_from_the_parsers():
    text = help_text()
    for synopsis in (
        "%job [status [CONTEXT]]",
        "%job apply --local MESH=N[,MESH=N...]",
        "%job kill [CONTEXT]",
        "%job context use NAME",
        "%job context rm NAME",
    ):
        assert synopsis in text
    with pytest.raises(HelpRequested) as info:
        parse("--help")
    assert info.value.text == text
    with pytest.raises(HelpRequested) as info:
        parse("kill -h")
    assert info.value.text.startswith("usage: %job kill [-h] [CONTEXT]")
    with pytest.raises(HelpRequested) as info:
        parse("apply --help")
    assert "%job apply module.attr" in info.value.text


def test_a_bare_job_is_the_status_command_as_parsed():
    """``%job`` takes a path without argparse; it must mean what ``%job status`` parses to."""
    assert parse("") == parse("   ") == parse("status") == JobCommand("status", {"context": None})
