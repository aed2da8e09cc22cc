"""Bad datasets and manifests at the command line: a clear error, a non-zero exit, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evictlab.cli import main
from evictlab.core.demo import DEMO_DATASET, DEMO_MANIFEST, DEMO_PIN
from evictlab.core.protocol import sha256_file


def candidate_index(rows, kind="knowledge-update"):
    return next(i for i, row in enumerate(rows) if row["question_type"] == kind)


def drop_dates(rows):
    rows[candidate_index(rows)].pop("haystack_dates")


def unequal_lengths(rows):
    rows[candidate_index(rows)]["haystack_dates"].append("2023/01/01 (Sun) 00:00")


def duplicate_id(rows):
    rows.append(dict(rows[candidate_index(rows)]))


def other_selection(rows):
    # A copy of a selected case under an id that sorts first displaces the manifest's last one.
    first = json.loads(DEMO_MANIFEST.read_text())["scenarios"]["confirmation_help"][0]
    rows.append(dict(next(row for row in rows if row["question_id"] == first), question_id="00000000"))


CASES = {
    "truncated JSON": (lambda text: text[: len(text) // 2], "not valid JSON"),
    "row without haystack_dates": (drop_dates, "field haystack_dates"),
    "arrays of unequal length": (unequal_lengths, "equal length"),
    "duplicate question id": (duplicate_id, "duplicate question_id"),
    "manifest disagrees": (other_selection, "disagrees with the selection recomputed"),
}


def broken_copy(tmp_path: Path, change) -> Path:
    text = DEMO_DATASET.read_text(encoding="utf-8")
    if change.__name__ == "<lambda>":
        text = change(text)
    else:
        rows = json.loads(text)
        change(rows)
        text = json.dumps(rows, ensure_ascii=False)
    path = tmp_path / "broken.json"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("command", ["validate", "run-policy"])
def test_bad_dataset_is_a_clear_error_and_writes_nothing(name, command, tmp_path, capsys):
    change, message = CASES[name]
    dataset = broken_copy(tmp_path, change)
    output = tmp_path / "out"
    argv = [command, "--dataset", str(dataset), "--allow-unpinned", "--official-manifest", str(DEMO_MANIFEST)]
    if command == "run-policy":
        argv += ["--output-dir", str(output)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not output.exists()


def test_wrong_hash_is_refused_without_allow_unpinned(tmp_path, capsys):
    dataset = tmp_path / "copy.json"
    dataset.write_bytes(DEMO_DATASET.read_bytes() + b" ")
    assert main(["validate", "--dataset", str(dataset), "--official-manifest", str(DEMO_MANIFEST)]) == 2
    err = capsys.readouterr().err
    assert "is not the pinned" in err and "--allow-unpinned" in err


def test_missing_dataset_file(tmp_path, capsys):
    assert main(["validate", "--dataset", str(tmp_path / "nope.json")]) == 2
    assert "dataset file not found" in capsys.readouterr().err


def test_unpinned_dataset_is_recorded_in_run_json(tmp_path, capsys):
    dataset = tmp_path / "copy.json"
    dataset.write_bytes(DEMO_DATASET.read_bytes() + b"\n")
    output = tmp_path / "out"
    argv = ["run-policy", "--dataset", str(dataset), "--allow-unpinned",
            "--official-manifest", str(DEMO_MANIFEST), "--output-dir", str(output)]
    assert main(argv) == 0
    assert "warning:" in capsys.readouterr().err
    run = json.loads((output / "run.json").read_text())
    assert run["dataset"]["pinned"] is False
    assert run["dataset"]["sha256"] == sha256_file(dataset) != DEMO_PIN.sha256


def test_diff_warns_about_an_unpinned_dataset(tmp_path, capsys):
    dataset = tmp_path / "copy.json"
    dataset.write_bytes(DEMO_DATASET.read_bytes() + b"\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"preset: pr4810-final\nofficial_manifest: {DEMO_MANIFEST}\n")
    argv = ["diff", "--dataset", str(dataset), "--allow-unpinned", "--from", str(spec), "--to", str(spec),
            "--output-dir", str(tmp_path / "out")]
    assert main(argv) == 0
    assert "warning:" in capsys.readouterr().err
    summary = json.loads((tmp_path / "out" / "diff.summary.json").read_text())
    assert summary["dataset"]["pinned"] is False


def test_the_manifests_selection_block_drives_the_recomputed_selection(tmp_path, capsys):
    # Listing a selected demo case as a pilot id excludes it, so the manifest no longer agrees.
    manifest = json.loads(DEMO_MANIFEST.read_text())
    first = manifest["scenarios"]["confirmation_help"][0]
    manifest["selection"]["excluded_pilot_ids"].append(first)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    assert main(["validate", "--official-manifest", str(DEMO_MANIFEST)]) == 0
    capsys.readouterr()
    assert main(["validate", "--official-manifest", str(path)]) == 2
    err = capsys.readouterr().err
    assert "disagrees with the selection recomputed" in err and f"manifest-only ['{first}']" in err
