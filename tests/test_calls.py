"""The one protocol between ptodsl and its workers: a request and a payload in, a reply or a
fault out, whatever the worker module."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from ptodsl.runtime import calls

ECHO_WORKER = """import sys
from ptodsl.runtime import calls

class Refused(Exception):
    pass

def answer(request, payload, folder):
    if request["do"] == "refuse":
        raise Refused("the request asks for what this worker refuses")
    if request["do"] == "break":
        raise KeyError("a bug of the worker's own")
    payload["x"].mul_(2)  # the payload is the worker's copy: the caller's file is not written
    return {"doubled": payload["x"], "told": request["do"]}

if __name__ == "__main__":
    sys.exit(calls.serve(answer, faults=(Refused,)))
"""


@pytest.fixture
def echo(tmp_path):
    package = tmp_path / "package"
    package.mkdir()
    (package / "echo_worker.py").write_text(ECHO_WORKER, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package), *sys.path]))

    def run(do: str) -> calls.Answer:
        folder = tmp_path / do
        folder.mkdir()
        calls.prepare(folder, {"do": do}, {"x": torch.arange(4.0)})
        return calls.call("echo_worker", folder, timeout=60, env=env)

    return run


def test_a_worker_replies_to_the_request_with_its_payload(echo):
    answer = echo("double")
    assert answer.status == 0 and answer.fault is None and answer.replied
    reply = answer.reply()
    assert reply["told"] == "double"
    assert torch.equal(reply["doubled"], torch.tensor([0.0, 2.0, 4.0, 6.0]))
    sent = torch.load(answer.folder / calls.PAYLOAD_FILE, weights_only=True)
    assert torch.equal(sent["x"], torch.arange(4.0))


def test_a_fault_the_worker_knows_is_said_in_its_words(echo):
    answer = echo("refuse")
    assert answer.status == 1 and not answer.replied
    assert answer.fault == "the request asks for what this worker refuses"
    assert "Traceback" in (answer.folder / "worker.log").read_text()


def test_a_workers_own_bug_crashes_it_with_nothing_said(echo):
    answer = echo("break")
    assert answer.status == 1 and answer.fault is None and not answer.replied
    assert 'KeyError: "a bug of the worker\'s own"' in (answer.folder / "worker.log").read_text()
