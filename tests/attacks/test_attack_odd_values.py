"""Odd values that ended in tracebacks (issue 26, "Remaining tracebacks from odd values").

A non-UTF-8 byte in a config or in a run spec's path, an evaluation time in the year 1 (the
pools date facts half a year before it), a timeout of 1e300 seconds in the config or on the
command line. Each is one error line naming the field, or a run that works; never a traceback.
Real processes, real files; the download never leaves 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evictlab import results
from evictlab.core.protocol import DEFAULT_CONFIG

PROTOCOL = DEFAULT_CONFIG.parent.parent  # data/protocol/
CONFIG = Path("configs") / DEFAULT_CONFIG.name


def evictlab(*argv: str | bytes, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "evictlab", *argv], capture_output=True, env=env, timeout=300)
    assert b"Traceback" not in done.stderr, done.stderr.decode("utf-8", "replace")
    return done


def protocol_copy(where: Path, edit=None) -> Path:
    shutil.copytree(PROTOCOL, where)
    if edit is not None:
        (where / CONFIG).write_bytes(edit((where / CONFIG).read_bytes()))
    return where / CONFIG


def test_a_non_utf8_byte_in_the_config_is_one_error_line(tmp_path):
    config = protocol_copy(tmp_path / "protocol", lambda data: data.replace(b"\n", b" # caf\xe9\n", 1))
    done = evictlab("run-policy", "--config", str(config), "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2 and b"not valid YAML" in done.stderr and str(config).encode() in done.stderr


def test_a_run_spec_naming_files_under_a_non_utf8_folder_runs_and_its_files_read_back(tmp_path):
    config = protocol_copy(Path(bytes(tmp_path / "proto").decode() + "\udcff"))  # the folder "proto\xff"
    spec = b"pr4810-final:config=" + bytes(config)
    folder = tmp_path / "out"
    done = evictlab("diff", "--from", spec, "--to", "pr4810-run1", "--output-dir", str(folder))
    assert done.returncode == 0, done.stderr
    assert results.read_record(folder, "diff").status == "success"  # the strict reader reads it back
    assert evictlab("view", str(folder), "--output", str(tmp_path / "page.html")).returncode == 0


@pytest.mark.parametrize("where", ["spec", "config"])
def test_an_evaluation_time_in_the_year_1_is_one_error_line(where, tmp_path):
    moment = b"0001-01-05T00:00:00Z"
    if where == "spec":
        argv = ["--from", b"pr4810-final:evaluation_time=" + moment, "--to", "pr4810-run1"]
    else:
        config = protocol_copy(tmp_path / "protocol", lambda data: data.replace(b"2026-08-13T00:00:00Z", moment))
        spec = f"pr4810-final:config={config}"
        argv = ["--from", spec, "--to", spec.replace("final", "run1")]
    done = evictlab("diff", *argv, "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2
    assert b"evaluation_time 0001-01-05T00:00:00Z (the run's clock) is too early" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_timeout_of_1e300_seconds_in_the_config_is_one_error_line(tmp_path, refused_port):
    huge = b"timeout_seconds: 1.0e+300"
    config = protocol_copy(tmp_path / "protocol", lambda data: data.replace(b"timeout_seconds: 120", huge))
    env = {"DEERMEM_EVAL_ANSWER_API_KEY": "k", "DEERMEM_EVAL_ANSWER_BASE_URL": f"http://127.0.0.1:{refused_port}/v1"}
    done = evictlab("run-qa", "--config", str(config), "--output-dir", str(tmp_path / "run"), "--retry-delay", "0",
                    env={**os.environ, **env})  # fmt: skip
    assert done.returncode == 2
    assert b"qa.timeout_seconds: must be" in done.stderr and b"86400" in done.stderr


def test_a_timeout_of_1e300_seconds_on_the_command_line_is_a_usage_error(tmp_path, refused_port):
    done = evictlab("data", "fetch", "--url", f"http://127.0.0.1:{refused_port}/longmemeval_oracle.json",
                    "--output", str(tmp_path / "oracle.json"), "--timeout", "1e300", "--quiet")  # fmt: skip
    assert done.returncode == 2 and b"--timeout: expected seconds > 0 and at most 86400" in done.stderr
