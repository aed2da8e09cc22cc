"""Attacks on sweep folders: parts changed behind the record's back, a full disk, bad input.

Issue 26: a resumed sweep trusted whatever part files it found (a truncated, emptied, swapped
or symlinked part was kept and the record said ``success``), ``load_sweep`` read parts the
record does not vouch for, a full disk left the record ``running``, and bad input found after
the folder was locked left a folder holding only an error record. Every sweep here is the real
command; the full disk is a real small tmpfs (root only; elsewhere those tests skip).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from test_attack_disk import remount, tmpfs  # noqa: F401  (the fixture)

from evictlab import results
from evictlab.analysis import sweep_output
from evictlab.analysis.sweep_output import MANIFEST_FILE, ROWS_FILE, SUMMARY_FILE
from evictlab.cli import main
from evictlab.errors import ContractError

OPTIONS = ["sweep", "--weights-step", "0.1", "--capacities", "5,7", "--chunk-rows", "2000", "--no-progress"]


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes), the run record aside."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }


def record(folder: Path) -> dict:
    return json.loads((folder / MANIFEST_FILE).read_text())


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("clean") / "sweep"
    assert main([*OPTIONS, "--output-dir", str(folder)]) == 0
    return folder


def interrupted_copy(clean: Path, target: Path) -> Path:
    """The clean folder as a killed run leaves it once its stale lock is found."""
    shutil.copytree(clean, target)
    data = record(target)
    (target / MANIFEST_FILE).write_text(json.dumps({**data, "status": "interrupted", "error": "killed"}))
    return target


def part(folder: Path, dataset: str, index: int) -> Path:
    return folder / dataset / f"part-{index:06d}.parquet"


def truncate(folder: Path) -> None:
    path = part(folder, ROWS_FILE, 1)
    path.write_bytes(path.read_bytes()[:-100])


def empty(folder: Path) -> None:
    part(folder, SUMMARY_FILE, 2).write_bytes(b"")


def swap(folder: Path) -> None:
    first, second = part(folder, ROWS_FILE, 0), part(folder, ROWS_FILE, 3)
    data = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(data)


def symlink(folder: Path) -> None:
    # The same bytes, through a link to a file outside the folder.
    path = part(folder, ROWS_FILE, 2)
    outside = folder.parent / "outside.parquet"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)


TAMPERS = {"truncated": (truncate, 1), "emptied": (empty, 1), "swapped": (swap, 2), "symlinked": (symlink, 1)}


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_a_resumed_sweep_redoes_every_part_its_record_does_not_vouch_for(name, clean, tmp_path, capsys):
    tamper, changed = TAMPERS[name]
    folder = interrupted_copy(clean, tmp_path / "sweep")
    tamper(folder)
    capsys.readouterr()
    assert main([*OPTIONS, "--output-dir", str(folder)]) == 0
    err = capsys.readouterr().err
    chunks = record(clean)["summary"]["chunks"]
    assert f"{changed} chunk(s) of the unfinished sweep here differ from its record" in err
    assert f"kept {chunks - changed} of {chunks} chunks" in err
    assert record(folder)["status"] == "success"
    assert not any(path.is_symlink() for path in folder.rglob("*"))
    assert folder_files(folder) == folder_files(clean)
    assert record(folder)["outputs"] == record(clean)["outputs"]


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_load_sweep_refuses_a_part_that_does_not_match_its_record(name, clean, tmp_path):
    tamper, _ = TAMPERS[name]
    folder = tmp_path / "sweep"
    shutil.copytree(clean, folder)
    tamper(folder)
    with pytest.raises(ContractError, match=r"part-00000\d\.parquet: missing, or not the file sweep\.run\.json lists"):
        sweep_output.load_sweep(folder)


def test_load_sweep_refuses_a_part_its_record_does_not_list(clean, tmp_path):
    folder = tmp_path / "sweep"
    shutil.copytree(clean, folder)
    extra = part(folder, ROWS_FILE, 99)
    shutil.copy(part(folder, ROWS_FILE, 0), extra)
    with pytest.raises(ContractError, match=f"{extra}: not listed in {MANIFEST_FILE}"):
        sweep_output.load_sweep(folder)


def test_a_part_folder_replaced_by_a_link_is_not_written_through(clean, tmp_path):
    folder = interrupted_copy(clean, tmp_path / "sweep")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(folder / SUMMARY_FILE, elsewhere)
    (folder / SUMMARY_FILE).symlink_to(elsewhere, target_is_directory=True)
    before = folder_files(elsewhere)
    assert main([*OPTIONS, "--output-dir", str(folder)]) == 0
    assert folder_files(elsewhere) == before
    assert folder_files(folder) == folder_files(clean)


# --- a full disk ------------------------------------------------------------------------------


def test_a_sweep_stopped_by_a_full_disk_names_the_path_ends_error_and_resumes(clean, tmpfs, capsys):  # noqa: F811
    size = sum(path.stat().st_size for path in clean.rglob("*") if path.is_file())
    disk = tmpfs(f"{(results.RECORD_RESERVE_BYTES + size // 2) // 1024}k")
    folder = disk / "sweep"
    assert main([*OPTIONS, "--output-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert line.endswith("No space left on device") and f"{folder}/" in line
    written = record(folder)
    assert written["status"] == "error" and "No space left on device" in written["error"]
    parts = [name for name in written["outputs"] if name.startswith(f"{ROWS_FILE}/")]
    assert 0 < len(parts) < written["summary"].get("chunks", written["parameters"]["chunking"]["chunks"])
    kept = {name: (folder / name).read_bytes() for name in written["outputs"] if "/part-" in name}
    assert all(kept[name] == folder_files(clean)[name] for name in kept)  # every finished part is whole
    assert not (folder / f".sweep{results.RECORD_RESERVE_SUFFIX}").exists()

    remount(disk, "size=64m")
    assert main([*OPTIONS, "--output-dir", str(folder)]) == 0
    assert f"kept {len(parts)} of" in capsys.readouterr().err
    assert record(folder)["status"] == "success"
    assert folder_files(folder) == folder_files(clean)


# --- bad input found under the lock -----------------------------------------------------------


@pytest.mark.parametrize("command", [OPTIONS, ["diff", "--from", "pr4810-run1", "--to", "pr4810-final"]])
def test_bad_input_leaves_no_folder(command, tmp_path, capsys):
    dataset = tmp_path / "broken.json"
    dataset.write_text("[{]")
    folder = tmp_path / "out"
    assert main([*command, "--dataset", str(dataset), "--allow-unpinned", "--output-dir", str(folder)]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not folder.exists(), sorted(os.listdir(folder))
