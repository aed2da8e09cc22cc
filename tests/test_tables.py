"""Key tables saved by a notebook and read back by the report (evictlab.workbench.tables)."""

import pandas as pd
import pytest

from evictlab.errors import ContractError
from evictlab.workbench.tables import read_table, read_tables, save_table


def test_a_table_reads_back_with_its_index_title_and_note(tmp_path):
    columns = pd.MultiIndex.from_tuples([("confidence", 5), ("hybrid-v1", 5)], names=["policy", "capacity"])
    frame = pd.DataFrame([["9/10", "10/10"], ["1/5", "5/5"]], columns=columns,
                         index=pd.Index(["access_help", "correction_reserve"], name="scenario"))
    assert save_table(frame, tmp_path, "02_kept", title="Kept", note="Data: demo.") is frame
    table = read_table(tmp_path / "02_kept.csv")
    assert (table.name, table.title, table.note, table.shown) == ("02_kept", "Kept", "Data: demo.", True)
    assert list(table.frame.columns) == ["confidence @ 5", "hybrid-v1 @ 5"]
    assert table.frame.loc["correction_reserve", "hybrid-v1 @ 5"] == "5/5"


def test_a_plain_frame_keeps_its_numbers_and_none_writes_nothing(tmp_path):
    frame = pd.DataFrame({"capacity": [5, 7], "mean": [-0.25, 0.125]})
    save_table(frame, tmp_path, "10_paired", title="Paired", shown=False)
    assert save_table(frame, None, "10_other", title="x") is frame
    tables = read_tables(tmp_path)
    assert list(tables) == ["10_paired"] and tables["10_paired"].shown is False
    pd.testing.assert_frame_equal(tables["10_paired"].frame, frame)
    assert read_tables(tmp_path / "missing") == {}


def test_names_are_plain_and_a_broken_table_is_named(tmp_path):
    with pytest.raises(ContractError, match="plain file stem"):
        save_table(pd.DataFrame({"a": [1]}), tmp_path, "../x", title="x")
    (tmp_path / "bad.csv").write_text("a\n1\n")
    with pytest.raises(ContractError, match=r"bad\.csv: not a saved table"):
        read_table(tmp_path / "bad.csv")


def test_an_unnamed_index_is_kept(tmp_path):
    frame = pd.DataFrame({"capacity 10": ["1.000 (+0.000)"]}, index=pd.Index(["optimum"]))
    save_table(frame, tmp_path, "10_curves", title="Curves")
    assert read_table(tmp_path / "10_curves.csv").frame.loc["optimum", "capacity 10"] == "1.000 (+0.000)"
